package gatewaylink

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/pairing/pairwire"
)

// The owner's routes: pairing sessions, the gateways list, unpairing and
// the RPC relay.

type pairingResponse struct {
	SessionID string `json:"session_id"`
	PairCode  string `json:"pair_code"`
	ExpiresAt string `json:"expires_at"`
}

func (l *Link) createPairing(w http.ResponseWriter, r *http.Request, ns string) {
	now := l.kit.Now()
	id, code := sqldb.NewID("gps_"), newPairingCode()
	if err := l.store.createPairing(r.Context(), ns, id, pairingCodeHash(id, code), l.deps.Quotas, now); err != nil {
		l.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusCreated, pairingResponse{SessionID: id, PairCode: code, ExpiresAt: web.Timestamp(now.Add(PairingTTL))})
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

func (l *Link) listGateways(w http.ResponseWriter, r *http.Request, ns string) {
	list, err := l.Gateways(r.Context(), ns)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	out := make([]gatewayJSON, len(list))
	for i, g := range list {
		out[i] = gatewayJSON{ID: g.ID, Name: g.Name, Version: g.Version, Online: g.Online, LastSeen: web.Timestamp(g.LastSeen),
			CreatedAt: web.Timestamp(g.CreatedAt), HPKEKey: g.HPKEKey, Fingerprint: g.Fingerprint}
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"gateways": out})
}

func (l *Link) unpairGateway(w http.ResponseWriter, r *http.Request, ns string) {
	g, err := l.store.deleteGateway(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		l.fail(w, r, err)
		return
	}
	l.hub.close(r.Context(), g, websocketStatusUnpaired, "unpaired by the owner")
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
func (l *Link) gatewayRPC(w http.ResponseWriter, r *http.Request, ns string) {
	// The slot is taken before the body is read, so an owner past the cap
	// costs no body bytes either.
	release, err := l.hub.ownerSlot(ns)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	defer release()
	var req rpcRequest
	if e := l.kit.Decode(w, r, &req); e != nil {
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
	g, err := l.store.gateway(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		l.fail(w, r, err)
		return
	}
	if !g.online(l.kit.Now(), l.window) {
		l.fail(w, r, errGatewayOffline)
		return
	}
	rid := sqldb.NewID("rpc_")
	ownerID := req.ID
	req.ID, _ = json.Marshal(rid)
	body, err := json.Marshal(req)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), l.cfg.RPCTimeout)
	defer cancel()
	answer, err := l.hub.call(ctx, g, rid, body)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(answer, &res); err != nil {
		l.fail(w, r, errors.New("gatewaylink: gateway answered malformed JSON"))
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

// Call sends the control plane's own RPC (method, params) to gateway id
// of ns and returns the gateway's JSON-RPC response. An offline gateway
// is errGatewayOffline.
func (l *Link) Call(ctx context.Context, ns, id, method string, params any) (json.RawMessage, error) {
	g, err := l.store.gateway(ctx, ns, id)
	if err != nil {
		return nil, err
	}
	if !g.online(l.kit.Now(), l.window) {
		return nil, errGatewayOffline
	}
	rid := sqldb.NewID("rpc_")
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: json.RawMessage(strconv.Quote(rid)), Method: method, Params: p})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.RPCTimeout)
	defer cancel()
	return l.hub.call(ctx, g, rid, body)
}

// IsOffline reports whether err is Call's answer for an offline gateway.
func IsOffline(err error) bool { return errors.Is(err, errGatewayOffline) }
