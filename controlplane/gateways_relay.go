package controlplane

import (
	"context"
	"crypto/rand"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/stdlib"
)

// The relay carries an owner's RPC to the socket of its gateway, which
// may be held by this Store's instance or, on PostgreSQL, by another
// control-plane instance sharing the database. Each instance LISTENs on a
// channel of its own, idn_gw_<instance>; a request is NOTIFYed to the
// instance the gateways row names, which answers on the sender's channel.
// A message larger than a notification allows travels in a gateway_relay
// row, and the notification carries the row's id. On SQLite the relay is
// in process: one instance per database file.
//
// The LISTEN connection is held only while it is needed: while this
// instance holds a socket or waits for a remote answer, and for
// listenLinger after, so a burst of RPCs does not reopen it each time.
//
// One goroutine reads every notification of an instance, whoever they are
// for, so nothing that waits on a gateway or on the database runs on it:
// closing a socket (which waits for the gateway's close frame) and
// reading a relay row are handed to goroutines of their own. No owner
// holds more than maxRPCsPerOwner RPCs waiting on an instance, and no
// gateway more than maxRPCsPerGateway on the instance holding its socket,
// so one owner's gateway that never answers ties up a bounded share.

// maxRPCsPerOwner caps the RPCs of one owner waiting at once on one
// instance; maxRPCsPerGateway caps those waiting on one gateway's socket,
// from every instance. Past either, GATEWAY_RPC_LIMIT_REACHED.
const (
	maxRPCsPerOwner   = 8
	maxRPCsPerGateway = 8
)

// maxNotifyPayload is what fits in a PostgreSQL notification (8000 bytes
// less a margin for the envelope).
const maxNotifyPayload = 7000

// listenLinger keeps an idle LISTEN connection open for the next request.
const listenLinger = 30 * time.Second

// relayWriteTimeout bounds writing one message to a gateway socket. It is
// separate from the RPC's deadline: a write cut short by a deadline would
// close the socket.
const relayWriteTimeout = 10 * time.Second

// relayMsg is one notification between instances.
type relayMsg struct {
	Kind    string          `json:"k"`              // "req", "res", "close" or "ref"
	ID      string          `json:"id,omitempty"`   // the relay id of req and res
	Gateway string          `json:"gw,omitempty"`   // req, close
	From    string          `json:"from,omitempty"` // req: the instance that waits
	Body    json.RawMessage `json:"body,omitempty"` // req: the request; res: the answer
	Conn    string          `json:"conn,omitempty"` // req: the connection id the sender's gateways row names
	Offline bool            `json:"offline,omitempty"`
	Busy    bool            `json:"busy,omitempty"` // res: the gateway has maxRPCsPerGateway waiting
	Row     string          `json:"row,omitempty"`  // ref: the gateway_relay row holding the message
}

// relayAnswer is a remote instance's answer to a relayed request.
type relayAnswer struct {
	body    []byte
	offline bool
	busy    bool
}

// gatewayRelay is a Store's side of the relay. Its zero value is ready.
type gatewayRelay struct {
	once     sync.Once
	instance string // random, names this Store's channel and its sockets in the database
	log      *slog.Logger
	timeout  time.Duration

	mu      sync.Mutex
	sockets map[string]*gatewaySocket   // gateway id → socket held here
	waiting map[string]chan relayAnswer // relay id → caller waiting for a remote answer
	users   int
	listen  *relayListener
	linger  *time.Timer
	owners  map[string]int // namespace → its RPCs waiting on this instance
}

// init sets what the relay needs from the first Server built on the
// Store.
func (r *gatewayRelay) init(log *slog.Logger, timeout time.Duration) {
	r.once.Do(func() {
		var b [8]byte
		rand.Read(b[:])
		r.instance = hex.EncodeToString(b[:])
		r.log, r.timeout = log, timeout
		r.sockets = map[string]*gatewaySocket{}
		r.waiting = map[string]chan relayAnswer{}
		r.owners = map[string]int{}
	})
}

// ownerSlot reserves one of the owner's maxRPCsPerOwner RPC slots on this
// instance; release gives it back.
func (r *gatewayRelay) ownerSlot(ns string) (release func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owners[ns] >= maxRPCsPerOwner {
		return nil, errGatewayRPCLimit
	}
	r.owners[ns]++
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.owners[ns]--; r.owners[ns] == 0 {
			delete(r.owners, ns)
		}
	}, nil
}

func channelOf(instance string) string { return "idn_gw_" + instance }

// gatewaySocket is a gateway's socket held by this instance.
type gatewaySocket struct {
	gatewayID, connID string
	conn              *websocket.Conn
	done              chan struct{} // closed when the socket's reader ends

	mu      sync.Mutex
	pending map[string]chan []byte // relay id → the caller's answer
}

// call sends req (a JSON-RPC request whose id is rid) and waits for the
// answer of the same id; with maxRPCsPerGateway calls waiting already it
// refuses at once.
func (g *gatewaySocket) call(ctx context.Context, rid string, req []byte) ([]byte, error) {
	ch := make(chan []byte, 1)
	g.mu.Lock()
	if len(g.pending) >= maxRPCsPerGateway {
		g.mu.Unlock()
		return nil, errGatewayRPCLimit
	}
	g.pending[rid] = ch
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.pending, rid)
		g.mu.Unlock()
	}()
	wctx, cancel := context.WithTimeout(context.Background(), relayWriteTimeout)
	err := g.conn.Write(wctx, websocket.MessageText, req)
	cancel()
	if err != nil {
		return nil, errGatewayOffline
	}
	select {
	case b := <-ch:
		return b, nil
	case <-g.done:
		return nil, errGatewayOffline
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, errGatewayTimeout
		}
		return nil, ctx.Err()
	}
}

// deliver hands an answer to the caller waiting for its id; an answer
// nobody waits for (late, or made up) is dropped.
func (g *gatewaySocket) deliver(rid string, b []byte) bool {
	g.mu.Lock()
	ch, ok := g.pending[rid]
	delete(g.pending, rid)
	g.mu.Unlock()
	if ok {
		ch <- b
	}
	return ok
}

// hold registers sock as this instance's socket of its gateway and
// returns the socket it replaces, if any.
func (r *gatewayRelay) hold(sock *gatewaySocket) *gatewaySocket {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.sockets[sock.gatewayID]
	r.sockets[sock.gatewayID] = sock
	return old
}

// drop forgets sock unless a newer socket replaced it.
func (r *gatewayRelay) drop(sock *gatewaySocket) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sockets[sock.gatewayID] == sock {
		delete(r.sockets, sock.gatewayID)
	}
}

func (r *gatewayRelay) local(gatewayID string) *gatewaySocket {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sockets[gatewayID]
}

// closeLocal starts closing this instance's socket of a gateway, if it
// holds one, and returns at once: the close handshake waits (up to 5 s)
// for the gateway's close frame, and a gateway that never reads never
// sends it.
func (r *gatewayRelay) closeLocal(gatewayID string, code websocket.StatusCode, reason string) {
	if sock := r.local(gatewayID); sock != nil {
		go sock.conn.Close(code, reason)
	}
}

// closeAll closes every socket held here with code, all at once, and
// returns when every close handshake ended.
func (r *gatewayRelay) closeAll(code websocket.StatusCode, reason string) {
	r.mu.Lock()
	socks := make([]*gatewaySocket, 0, len(r.sockets))
	for _, s := range r.sockets {
		socks = append(socks, s)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range socks {
		wg.Go(func() { s.conn.Close(code, reason) })
	}
	wg.Wait()
}

// relayCall sends an RPC to gateway g wherever its socket is held and
// returns the gateway's answer.
func (s *Store) relayCall(ctx context.Context, g gatewayRecord, rid string, req []byte) ([]byte, error) {
	r := &s.relay
	// A socket this instance still lists may be one being torn down after
	// the gateway connected elsewhere: only the one the record names counts.
	if sock := r.local(g.ID); sock != nil && sock.connID == g.ConnID {
		return sock.call(ctx, rid, req)
	}
	if !s.db.PG() || g.Instance == "" || g.Instance == r.instance {
		return nil, errGatewayOffline
	}
	release, err := s.acquireListener(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	ch := make(chan relayAnswer, 1)
	r.mu.Lock()
	r.waiting[rid] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiting, rid)
		r.mu.Unlock()
	}()
	if err := s.notify(ctx, g.Instance, relayMsg{Kind: "req", ID: rid, Gateway: g.ID, Conn: g.ConnID, From: r.instance, Body: req}); err != nil {
		return nil, err
	}
	select {
	case a := <-ch:
		switch {
		case a.busy:
			return nil, errGatewayRPCLimit
		case a.offline:
			return nil, errGatewayOffline
		}
		return a.body, nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, errGatewayTimeout
		}
		return nil, ctx.Err()
	}
}

// relayClose asks whichever instance holds gateway g's socket to close it.
func (s *Store) relayClose(ctx context.Context, g gatewayRecord, code websocket.StatusCode, reason string) {
	r := &s.relay
	if r.local(g.ID) != nil {
		r.closeLocal(g.ID, code, reason)
		return
	}
	if s.db.PG() && g.Instance != "" && g.Instance != r.instance {
		if err := s.notify(ctx, g.Instance, relayMsg{Kind: "close", Gateway: g.ID}); err != nil {
			r.log.WarnContext(ctx, "gateway relay: close not sent; the holder's heartbeat will close it", "gateway", g.ID, "err", err)
		}
	}
}

// notify sends m to instance's channel, through a relay row when it is too
// large for a notification.
func (s *Store) notify(ctx context.Context, instance string, m relayMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("controlplane: encode relay message: %w", err)
	}
	if len(b) > maxNotifyPayload {
		row, err := s.putRelayRow(ctx, b, time.Now())
		if err != nil {
			return err
		}
		b, _ = json.Marshal(relayMsg{Kind: "ref", Row: row})
	}
	_, err = s.db.Exec(ctx, `SELECT pg_notify($1, $2)`, channelOf(instance), string(b))
	return sqldb.Err("notify", err)
}

// received handles one notification on this instance's channel. It runs
// on the LISTEN goroutine, so it never waits: a relay row is read on a
// goroutine of its own.
func (s *Store) received(payload []byte) {
	r := &s.relay
	var m relayMsg
	if err := json.Unmarshal(payload, &m); err != nil {
		r.log.Warn("gateway relay: malformed notification dropped")
		return
	}
	if m.Kind == "ref" {
		go s.receivedRow(m.Row)
		return
	}
	s.handle(m)
}

// receivedRow reads and handles a message that travelled in a relay row.
func (s *Store) receivedRow(row string) {
	r := &s.relay
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	b, err := s.takeRelayRow(ctx, row)
	cancel()
	if err != nil {
		r.log.Warn("gateway relay: relay row unreadable", "err", err)
		return
	}
	var m relayMsg
	if err := json.Unmarshal(b, &m); err != nil || m.Kind == "ref" {
		r.log.Warn("gateway relay: malformed relay row dropped")
		return
	}
	s.handle(m)
}

// handle acts on one relay message without waiting.
func (s *Store) handle(m relayMsg) {
	r := &s.relay
	switch m.Kind {
	case "res":
		r.mu.Lock()
		ch, ok := r.waiting[m.ID]
		delete(r.waiting, m.ID)
		r.mu.Unlock()
		if ok {
			ch <- relayAnswer{body: m.Body, offline: m.Offline, busy: m.Busy}
		}
	case "close":
		r.closeLocal(m.Gateway, websocketStatusUnpaired, "unpaired by the owner")
	case "req":
		go s.answerRemote(m)
	}
}

// answerRemote runs a request relayed from another instance on the local
// socket and sends the answer back.
func (s *Store) answerRemote(m relayMsg) {
	r := &s.relay
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	answer := relayMsg{Kind: "res", ID: m.ID}
	// As on the sender's side, only the socket of the connection the
	// gateways row names counts: not one being torn down after the gateway
	// connected again.
	sock := r.local(m.Gateway)
	if sock == nil || sock.connID != m.Conn {
		answer.Offline = true
	} else {
		b, err := sock.call(ctx, m.ID, m.Body)
		switch {
		case errors.Is(err, errGatewayTimeout):
			return // the sender times out on its own clock
		case errors.Is(err, errGatewayRPCLimit):
			answer.Busy = true
		case err != nil:
			answer.Offline = true
		default:
			answer.Body = b
		}
	}
	if err := s.notify(context.Background(), m.From, answer); err != nil {
		r.log.Warn("gateway relay: answer not sent", "err", err)
	}
}

// relayListener is the goroutine that holds LISTEN on this instance's
// channel.
type relayListener struct {
	ready chan struct{} // closed once LISTEN ran
	stop  context.CancelFunc
	done  chan struct{}
}

// acquireListener makes sure this instance is listening (PostgreSQL only)
// until release is called.
func (s *Store) acquireListener(ctx context.Context) (release func(), err error) {
	if !s.db.PG() {
		return func() {}, nil
	}
	r := &s.relay
	r.mu.Lock()
	r.users++
	if r.linger != nil {
		r.linger.Stop()
		r.linger = nil
	}
	l := r.listen
	if l == nil {
		l = s.startListener()
		r.listen = l
	}
	r.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(s.releaseListener) }
	select {
	case <-l.ready:
		return release, nil
	case <-ctx.Done():
		release()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, errGatewayTimeout
		}
		return nil, ctx.Err()
	}
}

func (s *Store) releaseListener() {
	r := &s.relay
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users--
	if r.users > 0 || r.listen == nil {
		return
	}
	l := r.listen
	r.linger = time.AfterFunc(listenLinger, func() {
		r.mu.Lock()
		if r.users > 0 || r.listen != l {
			r.mu.Unlock()
			return
		}
		r.listen, r.linger = nil, nil
		r.mu.Unlock()
		l.stop()
		<-l.done
	})
}

// startListener starts the LISTEN goroutine. It reconnects (after a
// second) when its connection fails, until stopped.
func (s *Store) startListener() *relayListener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &relayListener{ready: make(chan struct{}), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		var readyOnce sync.Once
		for ctx.Err() == nil {
			err := s.listenOnce(ctx, func() { readyOnce.Do(func() { close(l.ready) }) })
			if ctx.Err() != nil {
				return
			}
			s.relay.log.Warn("gateway relay: LISTEN connection failed; reconnecting", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return l
}

// listenOnce holds one connection in LISTEN and hands every notification
// to received until ctx ends or the connection fails.
func (s *Store) listenOnce(ctx context.Context, ready func()) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		if _, err := pc.Exec(ctx, `LISTEN `+channelOf(s.relay.instance)); err != nil {
			return err
		}
		ready()
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				// The connection is left in LISTEN: discard it rather
				// than hand it back to the pool.
				return errors.Join(err, driver.ErrBadConn)
			}
			s.received([]byte(n.Payload))
		}
	})
}
