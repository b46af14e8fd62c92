package gatewaylink

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/pairing/pairwire"
)

// The owner's connect flow of an OAuth account (docs/control-plane.md,
// "OAuth connections in the dashboard"). The gateway makes state and the
// PKCE verifier and keeps them; the control plane keeps which gateway,
// connection and subject a state belongs to, and relays the provider's
// redirect there. It never sees a token or the verifier.

// CallbackPath is where providers redirect the owner's browser, under
// the control plane's base path: the redirect URI the owner registers.
const CallbackPath = "/oauth/callback"

// ConnectTTL bounds how long the control plane relays a flow's redirect;
// the gateway's own expiry may be shorter.
const ConnectTTL = 10 * time.Minute

// maxConnectFlows bounds one owner's flows in progress; starting one more
// forgets the oldest.
const maxConnectFlows = 64

// ErrConnectFlowUnknown is a redirect whose state names no flow of the
// signed-in owner in progress: unknown, used, expired, or another
// owner's. The four are not told apart.
var ErrConnectFlowUnknown = errors.New("gatewaylink: no connect flow in progress with this state")

var connectionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

type connectRequest struct {
	ConnectionID string `json:"connection_id"`
	Subject      string `json:"subject,omitempty"`
}

type connectStarted struct {
	AuthorizationURL string    `json:"authorization_url"`
	State            string    `json:"state"`
	ExpiresAt        time.Time `json:"expires_at"`
}

// startConnect asks gateway {id} to start connecting an account and
// answers the provider's authorization URL to send the browser to.
func (l *Link) startConnect(w http.ResponseWriter, r *http.Request, ns string) {
	release, err := l.hub.ownerSlot(ns)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	defer release()
	var req connectRequest
	if e := l.kit.Decode(w, r, &req); e != nil {
		apierror.Write(w, r, e)
		return
	}
	switch {
	case !connectionIDPattern.MatchString(req.ConnectionID):
		apierror.Write(w, r, web.Validation("connection_id must be a connection's id"))
		return
	case len(req.Subject) > 256 || strings.ContainsFunc(req.Subject, func(c rune) bool { return c < ' ' || c == 0x7f }):
		apierror.Write(w, r, web.Validation("subject must be at most 256 bytes without control characters"))
		return
	}
	gatewayID := r.PathValue("id")
	params := map[string]string{"id": req.ConnectionID, "redirect_uri": l.kit.Origin(r) + l.kit.Base + CallbackPath}
	if req.Subject != "" {
		params["subject"] = req.Subject
	}
	raw, err := l.Call(r.Context(), ns, gatewayID, pairwire.MethodConnectStart, params)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	var s connectStarted
	if err := rpcResult(raw, &s); err != nil {
		l.fail(w, r, err)
		return
	}
	// The page sends the browser there: only an http(s) URL, never a
	// script, whatever the gateway answers.
	u, perr := url.Parse(s.AuthorizationURL)
	if perr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || s.State == "" || len(s.State) > 512 {
		apierror.Write(w, r, apierror.Coded(errcode.UpstreamError, "the gateway answered no http(s) authorization URL and state"))
		return
	}
	now := l.kit.Now()
	expires := now.Add(ConnectTTL)
	if s.ExpiresAt.After(now) && s.ExpiresAt.Before(expires) {
		expires = s.ExpiresAt
	}
	if err := l.store.createConnectFlow(r.Context(), connectFlow{stateHash: stateHash(s.State), namespace: ns, gateway: gatewayID,
		connection: req.ConnectionID, subject: req.Subject, expires: expires}, now); err != nil {
		l.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]string{"authorization_url": s.AuthorizationURL, "expires_at": web.Timestamp(expires)})
}

// ConnectResult names the account a redirect was for.
type ConnectResult struct {
	GatewayID, ConnectionID, Subject string
}

// FinishConnect relays the provider's redirect q (state, iss, and code or
// error) to the gateway whose flow of owner ns its state names. The flow
// is used once. A gateway's refusal is an *apierror.Error with its code
// and message.
func (l *Link) FinishConnect(ctx context.Context, ns string, q url.Values) (ConnectResult, error) {
	state := q.Get("state")
	if state == "" || len(state) > 512 {
		return ConnectResult{}, ErrConnectFlowUnknown
	}
	f, err := l.store.takeConnectFlow(ctx, ns, stateHash(state), l.kit.Now())
	if err != nil {
		return ConnectResult{}, err
	}
	res := ConnectResult{GatewayID: f.gateway, ConnectionID: f.connection, Subject: f.subject}
	query := map[string]string{}
	for _, k := range []string{"state", "iss", "code", "error"} {
		switch v := q[k]; len(v) {
		case 0:
		case 1:
			query[k] = v[0]
		default:
			return res, web.Validation("the redirect repeats its %s parameter", k)
		}
	}
	params := map[string]any{"id": f.connection, "query": query}
	if f.subject != "" {
		params["subject"] = f.subject
	}
	raw, err := l.Call(ctx, ns, f.gateway, pairwire.MethodConnectFinish, params)
	if err != nil {
		return res, rules.Answer(err)
	}
	return res, rpcResult(raw, nil)
}

// rpcResult decodes a gateway's JSON-RPC answer into dst (nil: ignored).
// An admin error comes back as an *apierror.Error with the gateway's code
// and message; any other error answer as a 502.
func rpcResult(raw json.RawMessage, dst any) error {
	var a struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Code  string `json:"code"`
				Error string `json:"error"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return errors.New("gatewaylink: gateway answered malformed JSON")
	}
	if e := a.Error; e != nil {
		if code, ok := errcode.Parse(e.Data.Code); ok && e.Code == pairwire.CodeAPIError {
			return apierror.Coded(code, e.Data.Error)
		}
		return apierror.Coded(errcode.UpstreamError, "the gateway refused: "+e.Message)
	}
	if dst == nil {
		return nil
	}
	if err := json.Unmarshal(a.Result, dst); err != nil {
		return errors.New("gatewaylink: gateway answered a malformed result")
	}
	return nil
}

func stateHash(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

// connectFlow is a row of gateway_connect_flows.
type connectFlow struct {
	stateHash, namespace, gateway, connection, subject string
	expires                                            time.Time
}

// createConnectFlow records f, forgetting expired flows and the owner's
// oldest beyond maxConnectFlows.
func (s store) createConnectFlow(ctx context.Context, f connectFlow, now time.Time) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM gateway_connect_flows WHERE expires_at <= $1`, sqldb.Micros(now)); err != nil {
			return sqldb.Err("delete expired connect flows", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO gateway_connect_flows (state_hash, namespace, gateway_id, connection_id, subject, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, f.stateHash, f.namespace, f.gateway, f.connection, f.subject, sqldb.Micros(f.expires)); err != nil {
			return sqldb.Err("insert connect flow", err)
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM gateway_connect_flows WHERE namespace = $1 AND expires_at <= (
			SELECT expires_at FROM gateway_connect_flows WHERE namespace = $1 ORDER BY expires_at DESC LIMIT 1 OFFSET $2)`,
			f.namespace, maxConnectFlows)
		return sqldb.Err("trim connect flows", err)
	})
}

// takeConnectFlow removes and returns ns's live flow of stateHash, else
// ErrConnectFlowUnknown.
func (s store) takeConnectFlow(ctx context.Context, ns, hash string, now time.Time) (connectFlow, error) {
	f := connectFlow{stateHash: hash, namespace: ns}
	var expires int64
	err := s.db.WriteRow(ctx, `DELETE FROM gateway_connect_flows WHERE state_hash = $1 AND namespace = $2
		RETURNING gateway_id, connection_id, subject, expires_at`, hash, ns).Scan(&f.gateway, &f.connection, &f.subject, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return f, ErrConnectFlowUnknown
	case err != nil:
		return f, sqldb.Err("take connect flow", err)
	}
	if f.expires = sqldb.FromMicros(expires); !now.Before(f.expires) {
		return f, ErrConnectFlowUnknown
	}
	return f, nil
}
