package gatewaylink

import (
	"context"
	"crypto/rand"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

// The hub holds this instance's gateway sockets and relays an owner's RPC
// to the socket of its gateway, which may be held here or, on PostgreSQL,
// by another control-plane instance sharing the database. Each instance LISTENs on a
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
// holds more than MaxRPCsPerOwner RPCs waiting on an instance, and no
// gateway more than MaxRPCsPerGateway on the instance holding its socket,
// so one owner's gateway that never answers ties up a bounded share.

// MaxRPCsPerOwner caps the RPCs of one owner waiting at once on one
// instance; MaxRPCsPerGateway caps those waiting on one gateway's socket,
// from every instance. Past either, 429 GATEWAY_RPC_LIMIT_REACHED.
const (
	MaxRPCsPerOwner   = 8
	MaxRPCsPerGateway = 8
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
	Busy    bool            `json:"busy,omitempty"` // res: the gateway has MaxRPCsPerGateway waiting
	Row     string          `json:"row,omitempty"`  // ref: the gateway_relay row holding the message
}

// relayAnswer is a remote instance's answer to a relayed request.
type relayAnswer struct {
	body    []byte
	offline bool
	busy    bool
}

// hub is one instance's side of the relay: the sockets it holds, the
// callers waiting for another instance's answer and the LISTEN
// connection.
type hub struct {
	instance string // random, names this instance's channel and its sockets in the database
	store    store
	log      *slog.Logger
	now      func() time.Time
	timeout  time.Duration                                                                  // of an RPC relayed from another instance
	every    time.Duration                                                                  // heartbeat
	keys     func(ctx context.Context, ns string) (keys, update json.RawMessage, err error) // nil: none

	mu      sync.Mutex
	sockets map[string]*gatewaySocket   // gateway id → socket held here
	waiting map[string]chan relayAnswer // relay id → caller waiting for a remote answer
	users   int
	listen  *relayListener
	linger  *time.Timer
	owners  map[string]int // namespace → its RPCs waiting on this instance
}

func newHub(st store, log *slog.Logger, now func() time.Time, timeout, heartbeat time.Duration,
	keys func(context.Context, string) (json.RawMessage, json.RawMessage, error)) *hub {
	var b [8]byte
	rand.Read(b[:])
	return &hub{instance: hex.EncodeToString(b[:]), store: st, log: log, now: now, timeout: timeout, every: heartbeat, keys: keys,
		sockets: map[string]*gatewaySocket{}, waiting: map[string]chan relayAnswer{}, owners: map[string]int{}}
}

// ownerSlot reserves one of the owner's MaxRPCsPerOwner RPC slots on this
// instance; release gives it back.
func (h *hub) ownerSlot(ns string) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.owners[ns] >= MaxRPCsPerOwner {
		return nil, errGatewayRPCLimit
	}
	h.owners[ns]++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.owners[ns]--; h.owners[ns] == 0 {
			delete(h.owners, ns)
		}
	}, nil
}

func channelOf(instance string) string { return "idn_gw_" + instance }

// register registers sock as this instance's socket of its gateway and
// returns the socket it replaces, if any.
func (h *hub) register(sock *gatewaySocket) *gatewaySocket {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.sockets[sock.gatewayID]
	h.sockets[sock.gatewayID] = sock
	return old
}

// drop forgets sock unless a newer socket replaced it.
func (h *hub) drop(sock *gatewaySocket) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sockets[sock.gatewayID] == sock {
		delete(h.sockets, sock.gatewayID)
	}
}

func (h *hub) local(gatewayID string) *gatewaySocket {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sockets[gatewayID]
}

// closeLocal starts closing this instance's socket of a gateway, if it
// holds one, and returns at once: the close handshake waits (up to 5 s)
// for the gateway's close frame, and a gateway that never reads never
// sends it.
func (h *hub) closeLocal(gatewayID string, code websocket.StatusCode, reason string) {
	if sock := h.local(gatewayID); sock != nil {
		go sock.conn.Close(code, reason)
	}
}

// closeAll closes every socket held here with code, all at once, and
// returns when every close handshake ended.
func (h *hub) closeAll(code websocket.StatusCode, reason string) {
	h.mu.Lock()
	socks := make([]*gatewaySocket, 0, len(h.sockets))
	for _, s := range h.sockets {
		socks = append(socks, s)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range socks {
		wg.Go(func() { s.conn.Close(code, reason) })
	}
	wg.Wait()
}

// call sends an RPC to gateway g wherever its socket is held and returns
// the gateway's answer.
func (h *hub) call(ctx context.Context, g gatewayRecord, rid string, req []byte) ([]byte, error) {
	// A socket this instance still lists may be one being torn down after
	// the gateway connected elsewhere: only the one the record names counts.
	if sock := h.local(g.ID); sock != nil && sock.connID == g.ConnID {
		return sock.call(ctx, rid, req)
	}
	if !h.store.db.PG() || g.Instance == "" || g.Instance == h.instance {
		return nil, errGatewayOffline
	}
	release, err := h.acquireListener(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	ch := make(chan relayAnswer, 1)
	h.mu.Lock()
	h.waiting[rid] = ch
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.waiting, rid)
		h.mu.Unlock()
	}()
	if err := h.notify(ctx, g.Instance, relayMsg{Kind: "req", ID: rid, Gateway: g.ID, Conn: g.ConnID, From: h.instance, Body: req}); err != nil {
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

// close asks whichever instance holds gateway g's socket to close it.
func (h *hub) close(ctx context.Context, g gatewayRecord, code websocket.StatusCode, reason string) {
	if h.local(g.ID) != nil {
		h.closeLocal(g.ID, code, reason)
		return
	}
	if h.store.db.PG() && g.Instance != "" && g.Instance != h.instance {
		if err := h.notify(ctx, g.Instance, relayMsg{Kind: "close", Gateway: g.ID}); err != nil {
			h.log.WarnContext(ctx, "gateway relay: close not sent; the holder's heartbeat will close it", "gateway", g.ID, "err", err)
		}
	}
}

// notify sends m to instance's channel, through a relay row when it is too
// large for a notification.
func (h *hub) notify(ctx context.Context, instance string, m relayMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("gatewaylink: encode relay message: %w", err)
	}
	if len(b) > maxNotifyPayload {
		row, err := h.store.putRelayRow(ctx, b, time.Now())
		if err != nil {
			return err
		}
		b, _ = json.Marshal(relayMsg{Kind: "ref", Row: row})
	}
	_, err = h.store.db.Exec(ctx, `SELECT pg_notify($1, $2)`, channelOf(instance), string(b))
	return sqldb.Err("notify", err)
}

// received handles one notification on this instance's channel. It runs
// on the LISTEN goroutine, so it never waits: a relay row is read on a
// goroutine of its own.
func (h *hub) received(payload []byte) {
	var m relayMsg
	if err := json.Unmarshal(payload, &m); err != nil {
		h.log.Warn("gateway relay: malformed notification dropped")
		return
	}
	if m.Kind == "ref" {
		go h.receivedRow(m.Row)
		return
	}
	h.handle(m)
}

// receivedRow reads and handles a message that travelled in a relay row.
func (h *hub) receivedRow(row string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	b, err := h.store.takeRelayRow(ctx, row)
	cancel()
	if err != nil {
		h.log.Warn("gateway relay: relay row unreadable", "err", err)
		return
	}
	var m relayMsg
	if err := json.Unmarshal(b, &m); err != nil || m.Kind == "ref" {
		h.log.Warn("gateway relay: malformed relay row dropped")
		return
	}
	h.handle(m)
}

// handle acts on one relay message without waiting.
func (h *hub) handle(m relayMsg) {
	switch m.Kind {
	case "res":
		h.mu.Lock()
		ch, ok := h.waiting[m.ID]
		delete(h.waiting, m.ID)
		h.mu.Unlock()
		if ok {
			ch <- relayAnswer{body: m.Body, offline: m.Offline, busy: m.Busy}
		}
	case "close":
		h.closeLocal(m.Gateway, websocketStatusUnpaired, "unpaired by the owner")
	case "req":
		go h.answerRemote(m)
	}
}

// answerRemote runs a request relayed from another instance on the local
// socket and sends the answer back.
func (h *hub) answerRemote(m relayMsg) {
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	answer := relayMsg{Kind: "res", ID: m.ID}
	// As on the sender's side, only the socket of the connection the
	// gateways row names counts: not one being torn down after the gateway
	// connected again.
	sock := h.local(m.Gateway)
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
	if err := h.notify(context.Background(), m.From, answer); err != nil {
		h.log.Warn("gateway relay: answer not sent", "err", err)
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
func (h *hub) acquireListener(ctx context.Context) (release func(), err error) {
	if !h.store.db.PG() {
		return func() {}, nil
	}
	h.mu.Lock()
	h.users++
	if h.linger != nil {
		h.linger.Stop()
		h.linger = nil
	}
	l := h.listen
	if l == nil {
		l = h.startListener()
		h.listen = l
	}
	h.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(h.releaseListener) }
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

func (h *hub) releaseListener() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.users--
	if h.users > 0 || h.listen == nil {
		return
	}
	l := h.listen
	h.linger = time.AfterFunc(listenLinger, func() {
		h.mu.Lock()
		if h.users > 0 || h.listen != l {
			h.mu.Unlock()
			return
		}
		h.listen, h.linger = nil, nil
		h.mu.Unlock()
		l.stop()
		<-l.done
	})
}

// startListener starts the LISTEN goroutine. It reconnects (after a
// second) when its connection fails, until stopped.
func (h *hub) startListener() *relayListener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &relayListener{ready: make(chan struct{}), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		var readyOnce sync.Once
		for ctx.Err() == nil {
			err := h.listenOnce(ctx, func() { readyOnce.Do(func() { close(l.ready) }) })
			if ctx.Err() != nil {
				return
			}
			h.log.Warn("gateway relay: LISTEN connection failed; reconnecting", "err", err)
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
func (h *hub) listenOnce(ctx context.Context, ready func()) error {
	conn, err := h.store.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		if _, err := pc.Exec(ctx, `LISTEN `+channelOf(h.instance)); err != nil {
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
			h.received([]byte(n.Payload))
		}
	})
}
