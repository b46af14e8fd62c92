package gatewaylink

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/idnhq/idn/pairing/pairwire"
)

// serve makes this instance the holder of g's socket until it ends:
// it reads the gateway's answers, pings it and refreshes last_seen every
// heartbeat, and closes it when the gateway is unpaired or connects again
// elsewhere.
func (h *hub) serve(ctx context.Context, conn *websocket.Conn, g gatewayRecord) {
	defer conn.CloseNow()
	release, err := h.acquireListener(ctx)
	if err != nil {
		conn.Close(websocket.StatusTryAgainLater, "relay unavailable")
		return
	}
	defer release()
	sock := &gatewaySocket{gatewayID: g.ID, connID: sqldb.NewID("wsc_"), conn: conn, done: make(chan struct{}),
		pending: map[string]chan []byte{}}
	defer close(sock.done)
	if old := h.register(sock); old != nil {
		old.conn.Close(pairwire.CloseReplaced, "the gateway connected again")
	}
	defer h.drop(sock)
	attached, err := h.store.attachGateway(ctx, g.ID, h.instance, sock.connID, h.now())
	if err != nil || !attached {
		conn.Close(websocketStatusUnpaired, "not paired")
		return
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := h.store.detachGateway(dctx, g.ID, sock.connID, h.now()); err != nil {
			h.log.WarnContext(ctx, "gateway detach failed", "gateway", g.ID, "err", err)
		}
		cancel()
	}()
	ctl := pairwire.Control{Type: pairwire.ControlReady, GatewayID: g.ID, Namespace: g.Namespace}
	if h.keys != nil {
		if ctl.OwnerKeys, ctl.OwnerKeysUpdate, err = h.keys(ctx, g.Namespace); err != nil {
			h.log.WarnContext(ctx, "owner passkeys unavailable for the ready message", "gateway", g.ID, "err", err)
		}
	}
	ready, _ := json.Marshal(ctl)
	wctx, cancel := context.WithTimeout(ctx, relayWriteTimeout)
	err = conn.Write(wctx, websocket.MessageText, ready)
	cancel()
	if err != nil {
		return
	}
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	go h.heartbeat(hbCtx, sock)
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		var m struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(data, &m) != nil || m.ID == "" || !sock.deliver(m.ID, data) {
			h.log.DebugContext(ctx, "gateway message dropped: not an answer to a pending request", "gateway", g.ID)
		}
	}
}

// heartbeat pings the gateway and refreshes last_seen every Heartbeat; a
// gateway unpaired or held by a newer socket has this one closed.
func (h *hub) heartbeat(ctx context.Context, sock *gatewaySocket) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, h.every)
		err := sock.conn.Ping(pctx)
		cancel()
		if err != nil {
			sock.conn.CloseNow()
			return
		}
		alive, err := h.store.heartbeat(ctx, sock.gatewayID, sock.connID, h.now())
		if err == nil && !alive {
			sock.conn.Close(websocketStatusUnpaired, "no longer paired through this connection")
			return
		}
	}
}

// gatewaySocket is a gateway's socket held by this instance.
type gatewaySocket struct {
	gatewayID, connID string
	conn              *websocket.Conn
	done              chan struct{} // closed when the socket's reader ends

	mu      sync.Mutex
	pending map[string]chan []byte // relay id → the caller's answer
}

// call sends req (a JSON-RPC request whose id is rid) and waits for the
// answer of the same id; with MaxRPCsPerGateway calls waiting already it
// refuses at once.
func (g *gatewaySocket) call(ctx context.Context, rid string, req []byte) ([]byte, error) {
	ch := make(chan []byte, 1)
	g.mu.Lock()
	if len(g.pending) >= MaxRPCsPerGateway {
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
