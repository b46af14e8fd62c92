package approvaltest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idnhq/idn/approval"
)

// Desk is a control plane's action routes in memory, as approval.HTTPDesk
// reaches them: POST /v1/gateways/actions records what a gateway files,
// and GET /v1/gateways/actions/{id} answers the decision a test made. It
// checks no signature. Mount it at both paths:
//
//	mux.Handle("/v1/gateways/actions", desk)
//	mux.Handle("/v1/gateways/actions/", desk)
type Desk struct {
	mu        sync.Mutex
	filed     []approval.Request
	decisions map[string]approval.Status
}

// ServeHTTP serves the two routes.
func (d *Desk) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r.Method == http.MethodPost && r.URL.Path == "/v1/gateways/actions" {
		var f struct {
			ID         string          `json:"id"`
			Gateway    string          `json:"gateway"`
			Connection string          `json:"connection_id"`
			Namespace  string          `json:"agent_namespace"`
			PublicKey  string          `json:"agent_public_key"`
			Subject    string          `json:"subject"`
			Target     string          `json:"target"`
			Document   json.RawMessage `json:"document"`
			Digest     string          `json:"digest"`
			ExpiresAt  time.Time       `json:"expires_at"`
		}
		if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d.filed = append(d.filed, approval.Request{ID: f.ID, Gateway: f.Gateway, Connection: f.Connection, Namespace: f.Namespace,
			PublicKey: f.PublicKey, Subject: f.Subject, Target: f.Target, Document: f.Document, Digest: f.Digest, ExpiresAt: f.ExpiresAt})
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": f.ID, "status": "pending"})
		return
	}
	id, ok := strings.CutPrefix(r.URL.Path, "/v1/gateways/actions/")
	if r.Method != http.MethodGet || !ok {
		http.NotFound(w, r)
		return
	}
	st, ok := d.decisions[id]
	if !ok {
		st = approval.Status{State: "pending"}
	}
	dec := map[string]any{"id": id, "status": st.State}
	if st.State == "approved" {
		dec["uses"], dec["assertion"] = st.Uses, st.Assertion
		if !st.Until.IsZero() {
			dec["until"] = st.Until.UTC().Format(time.RFC3339)
		}
	}
	_ = json.NewEncoder(w).Encode(dec)
}

// Filed returns the requests filed so far, oldest first.
func (d *Desk) Filed() []approval.Request {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]approval.Request(nil), d.filed...)
}

// Approve records the owner's approval of r for uses calls, until a time
// (zero: r's expiry), signed by the passkey by as the dashboard would.
func (d *Desk) Approve(r approval.Request, uses int, until time.Time, by *Passkey) {
	g := approval.Grant{ActionID: r.ID, Gateway: r.Gateway, Digest: r.Digest, ExpiresAt: r.ExpiresAt, Uses: uses, Until: until}
	d.Decide(r.ID, approval.Status{State: "approved", Uses: uses, Until: until, Assertion: by.Assert(approval.Challenge(g), Flags)})
}

// Decide sets the status answered for action id, which may be a lie.
func (d *Desk) Decide(id string, st approval.Status) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.decisions == nil {
		d.decisions = map[string]approval.Status{}
	}
	d.decisions[id] = st
}
