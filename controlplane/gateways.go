package controlplane

import (
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/idnhq/idn/internal/apierror"
	"github.com/idnhq/idn/internal/display"
	"github.com/idnhq/idn/internal/pairwire"
)

// Gateway pairing lets the owner manage a gateway that runs elsewhere
// (on a laptop, behind NAT) from the dashboard. The owner starts a pairing
// session (POST /v1/gateways/pairings) and gets a one-time code; the
// gateway opens a WebSocket to /v1/gateways/connect with an upgrade signed
// by its own identity and presents the code in its first message. From
// then on the gateway's signing key alone lets it reconnect, until the
// owner unpairs it. The owner's RPCs (POST /v1/gateways/{id}/rpc) are
// relayed to the socket (gateways_relay.go) and answered with the
// gateway's JSON-RPC response. Secrets never pass here in clear: the
// dashboard seals them to the gateway's HPKE key.

// GatewayConfig configures gateway pairing. Its zero value is ready.
type GatewayConfig struct {
	// RPCTimeout bounds how long an RPC waits for the gateway's answer
	// before 504 GATEWAY_TIMEOUT; zero (or negative) means 30 s.
	RPCTimeout time.Duration
	// Heartbeat is how often a held socket is pinged and its gateway's
	// last_seen refreshed; zero (or negative) means 15 s. A gateway not
	// seen for three heartbeats counts as offline even if an instance died
	// holding it.
	Heartbeat time.Duration
}

// pairTimeout bounds the wait for an unpaired gateway's first message.
const pairTimeout = 10 * time.Second

var websocketStatusUnpaired = websocket.StatusCode(pairwire.CloseUnpaired)

func (s *Server) initGateways() {
	c := &s.cfg.Gateways
	c.RPCTimeout, c.Heartbeat = max(0, c.RPCTimeout), max(0, c.Heartbeat)
	setDefault(&c.RPCTimeout, 30*time.Second)
	setDefault(&c.Heartbeat, 15*time.Second)
	s.store.relay.init(s.log, c.RPCTimeout)
}

func (s *Server) gatewayRoutes(m *routeMux) {
	s.initGateways()
	m.Handle("POST /v1/gateways/pairings", s.sessions.Owner(s.createPairing))
	m.Handle("GET /v1/gateways", s.sessions.Owner(s.listGateways))
	m.Handle("DELETE /v1/gateways/{id}", s.sessions.Owner(s.unpairGateway))
	m.Handle("POST /v1/gateways/{id}/rpc", s.sessions.Owner(s.gatewayRPC))
	m.HandleFunc("GET "+pairwire.Path, s.gatewayConnect)
	m.HandleFunc("GET /gateways", s.ownerPage("gateways", "Gateways", s.gatewaysView))
	m.HandleFunc("GET /gateways/{id}", s.ownerPage("gateway", "Gateway", s.gatewayView))
}

// CloseGateways closes every gateway socket this Server's store holds,
// telling the gateways to reconnect (to another instance, or to this one
// once it is back). http.Server.Shutdown neither closes nor waits for
// WebSockets, so register it with RegisterOnShutdown.
func (s *Server) CloseGateways() {
	s.store.relay.closeAll(websocket.StatusGoingAway, "control plane shutting down")
}

type pairingResponse struct {
	SessionID string `json:"session_id"`
	PairCode  string `json:"pair_code"`
	ExpiresAt string `json:"expires_at"`
}

func (s *Server) createPairing(w http.ResponseWriter, r *http.Request, ns string) {
	now := s.now()
	id, code := newID("gps_"), newPairingCode()
	q := pairingQuota{open: s.cfg.MaxOpenPairings, gateways: s.cfg.MaxGateways}
	if err := s.store.createPairing(r.Context(), ns, id, pairingCodeHash(id, code), q, now); err != nil {
		s.writeErr(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusCreated, pairingResponse{SessionID: id, PairCode: code, ExpiresAt: web.Timestamp(now.Add(pairingTTL))})
}

// gatewayJSON is a gateway as the API shows it.
type gatewayJSON struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Version     string `json:"version"`
	Online      bool   `json:"online"`
	LastSeen    string `json:"last_seen,omitempty"`
	CreatedAt   string `json:"created_at"`
	HPKEKey     string `json:"hpke_public_key"`
	Fingerprint string `json:"hpke_key_fingerprint"`
}

func (s *Server) gatewayOut(g gatewayRecord) gatewayJSON {
	raw, _ := base64.RawURLEncoding.DecodeString(g.HPKEPublicKey)
	return gatewayJSON{ID: g.ID, Name: g.Name, Version: g.Version, Online: g.online(s.now(), 3*s.cfg.Gateways.Heartbeat),
		LastSeen: web.Timestamp(g.LastSeen), CreatedAt: web.Timestamp(g.CreatedAt), HPKEKey: g.HPKEPublicKey, Fingerprint: pairwire.Fingerprint(raw)}
}

func (s *Server) listGateways(w http.ResponseWriter, r *http.Request, ns string) {
	list, err := s.store.listGateways(r.Context(), ns)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	out := make([]gatewayJSON, len(list))
	for i, g := range list {
		out[i] = s.gatewayOut(g)
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"gateways": out})
}

func (s *Server) unpairGateway(w http.ResponseWriter, r *http.Request, ns string) {
	g, err := s.store.deleteGateway(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.store.relayClose(r.Context(), g, websocketStatusUnpaired, "unpaired by the owner")
	w.WriteHeader(http.StatusNoContent)
}

// rpcRequest is a JSON-RPC 2.0 request as the owner sends it.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// gatewayRPC relays one JSON-RPC request to a gateway of the owner and
// answers the gateway's JSON-RPC response, with the owner's id.
func (s *Server) gatewayRPC(w http.ResponseWriter, r *http.Request, ns string) {
	// The slot is taken before the body is read, so an owner past the cap
	// costs no body bytes either.
	release, err := s.store.relay.ownerSlot(ns)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	defer release()
	var req rpcRequest
	if e := s.kit.Decode(w, r, &req); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if req.JSONRPC != "2.0" {
		apierror.Write(w, r, web.Validation(`jsonrpc must be "2.0"`))
		return
	}
	if !validRPCID(req.ID) {
		apierror.Write(w, r, web.Validation("id must be a string or a number"))
		return
	}
	if !slices.Contains(pairwire.Methods, req.Method) {
		apierror.Write(w, r, web.Validation("unknown method; one of: %s", strings.Join(pairwire.Methods, ", ")))
		return
	}
	g, err := s.store.gateway(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if !g.online(s.now(), 3*s.cfg.Gateways.Heartbeat) {
		s.writeErr(w, r, errGatewayOffline)
		return
	}
	rid := newID("rpc_")
	ownerID := req.ID
	req.ID, _ = json.Marshal(rid)
	body, err := json.Marshal(req)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Gateways.RPCTimeout)
	defer cancel()
	answer, err := s.store.relayCall(ctx, g, rid, body)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(answer, &res); err != nil {
		s.writeErr(w, r, errors.New("controlplane: gateway answered malformed JSON"))
		return
	}
	res["id"] = ownerID
	apierror.WriteJSON(w, http.StatusOK, res)
}

func validRPCID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// gatewayConnect is the gateway's WebSocket. The upgrade must verify under
// the signing profile, so a replayed upgrade is refused; an unknown key is
// refused unless it names a pairing session to complete. The nonce is
// recorded (in the database) only once the key or the session has passed,
// so a stranger's upgrade writes nothing.
func (s *Server) gatewayConnect(w http.ResponseWriter, r *http.Request) {
	caller, ok := s.gate.Verify(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	g, err := s.store.gatewayByKey(ctx, caller.Namespace, caller.PublicKey)
	pairing := r.URL.Query().Get(pairwire.PairingQuery)
	switch {
	case errors.Is(err, errGatewayNotPaired) && pairing != "":
		// A socket is opened only for a session that can still complete.
		if err := s.store.pairingOpen(ctx, pairing, s.now()); err != nil {
			s.writeErr(w, r, err)
			return
		}
	case err != nil:
		s.writeErr(w, r, err)
		return
	}
	if !s.gate.RecordNonce(w, r, caller) {
		return
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{})
	if err != nil {
		return // Accept has answered
	}
	conn.SetReadLimit(pairwire.ReadLimit)
	// The socket outlives nothing but this handler; the request's context
	// ends with it.
	if g.ID == "" {
		if g, err = s.pair(ctx, conn, caller.Namespace, caller.PublicKey, pairing); err != nil {
			return
		}
	}
	s.holdSocket(ctx, conn, g)
}

// pair reads and checks an unpaired gateway's first message. On refusal it
// has told the gateway why and closed the socket.
func (s *Server) pair(ctx context.Context, conn *websocket.Conn, keyNS, pub, session string) (gatewayRecord, error) {
	refuse := func(err error) (gatewayRecord, error) {
		e := toAPIError(err)
		b, _ := json.Marshal(pairwire.Control{Type: pairwire.ControlError, Code: e.Code().String(), Message: e.Message})
		wctx, cancel := context.WithTimeout(ctx, relayWriteTimeout)
		conn.Write(wctx, websocket.MessageText, b)
		cancel()
		conn.Close(pairwire.ClosePairingFailed, e.Code().String())
		return gatewayRecord{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, pairTimeout)
	_, data, err := conn.Read(rctx)
	cancel()
	if err != nil {
		conn.CloseNow()
		return gatewayRecord{}, err
	}
	var p pairwire.Pair
	if err := json.Unmarshal(data, &p); err != nil {
		return refuse(web.Validation("the first message must be the pairing request"))
	}
	if p.SessionID != session {
		return refuse(web.Validation("session_id differs from the pairing the upgrade named"))
	}
	if err := checkPair(p); err != nil {
		return refuse(err)
	}
	g, err := s.store.redeemPairing(ctx, pairingAttempt{SessionID: p.SessionID, Code: p.PairCode, Namespace: p.Namespace,
		KeyNamespace: keyNS, PublicKey: pub, Name: p.Name, Version: p.Version, HPKE: p.HPKEPublicKey}, s.cfg.MaxGateways, s.now())
	if err != nil {
		if toAPIError(err).Code().Status() >= 500 {
			s.log.ErrorContext(ctx, "gateway pairing failed", "err", err)
		}
		return refuse(err)
	}
	s.log.InfoContext(ctx, "gateway paired", "gateway", g.ID, "namespace", g.Namespace)
	return g, nil
}

// checkPair validates the descriptive fields of a pairing request.
func checkPair(p pairwire.Pair) error {
	if !printable(p.Name, 100) || strings.TrimSpace(p.Name) == "" {
		return web.Validation("name must be 1 to 100 printable characters")
	}
	if !printable(p.Version, 64) {
		return web.Validation("version must be at most 64 printable characters")
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(p.HPKEPublicKey, "="))
	if err != nil || len(raw) != 32 {
		return web.Validation("hpke_public_key must be base64url of a raw 32-byte X25519 key")
	}
	if _, err := ecdh.X25519().NewPublicKey(raw); err != nil {
		return web.Validation("hpke_public_key is not an X25519 key")
	}
	return nil
}

func printable(v string, max int) bool {
	return len(v) <= max && display.Check(v) == nil
}

// holdSocket makes this instance the holder of g's socket until it ends:
// it reads the gateway's answers, pings it and refreshes last_seen every
// heartbeat, and closes it when the gateway is unpaired or connects again
// elsewhere.
func (s *Server) holdSocket(ctx context.Context, conn *websocket.Conn, g gatewayRecord) {
	defer conn.CloseNow()
	release, err := s.store.acquireListener(ctx)
	if err != nil {
		conn.Close(websocket.StatusTryAgainLater, "relay unavailable")
		return
	}
	defer release()
	r := &s.store.relay
	sock := &gatewaySocket{gatewayID: g.ID, connID: newID("wsc_"), conn: conn, done: make(chan struct{}),
		pending: map[string]chan []byte{}}
	defer close(sock.done)
	if old := r.hold(sock); old != nil {
		old.conn.Close(pairwire.CloseReplaced, "the gateway connected again")
	}
	defer r.drop(sock)
	attached, err := s.store.attachGateway(ctx, g.ID, r.instance, sock.connID, s.now())
	if err != nil || !attached {
		conn.Close(websocketStatusUnpaired, "not paired")
		return
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := s.store.detachGateway(dctx, g.ID, sock.connID, s.now()); err != nil {
			s.log.WarnContext(ctx, "gateway detach failed", "gateway", g.ID, "err", err)
		}
		cancel()
	}()
	ready, _ := json.Marshal(pairwire.Control{Type: pairwire.ControlReady, GatewayID: g.ID, Namespace: g.Namespace})
	wctx, cancel := context.WithTimeout(ctx, relayWriteTimeout)
	err = conn.Write(wctx, websocket.MessageText, ready)
	cancel()
	if err != nil {
		return
	}
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	go s.heartbeat(hbCtx, sock)
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		var m struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(data, &m) != nil || m.ID == "" || !sock.deliver(m.ID, data) {
			s.log.DebugContext(ctx, "gateway message dropped: not an answer to a pending request", "gateway", g.ID)
		}
	}
}

// heartbeat pings the gateway and refreshes last_seen every Heartbeat; a
// gateway unpaired or held by a newer socket has this one closed.
func (s *Server) heartbeat(ctx context.Context, sock *gatewaySocket) {
	t := time.NewTicker(s.cfg.Gateways.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, s.cfg.Gateways.Heartbeat)
		err := sock.conn.Ping(pctx)
		cancel()
		if err != nil {
			sock.conn.CloseNow()
			return
		}
		alive, err := s.store.heartbeat(ctx, sock.gatewayID, sock.connID, s.now())
		if err == nil && !alive {
			sock.conn.Close(websocketStatusUnpaired, "no longer paired through this connection")
			return
		}
	}
}
