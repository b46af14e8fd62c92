package actions

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
)

// errorRules maps the part's errors to answers.
var errorRules = web.Rules{
	web.When(web.Is(errNotFound), web.Code(errcode.ActionNotFound)),
	web.When(web.Is(errConflict), web.Code(errcode.ActionStateConflict)),
	web.When(web.Is(errExists), web.Code(errcode.ActionStateConflict)),
	web.When(web.Is(errTooMany), func(error) *apierror.Error {
		return apierror.Coded(errcode.PendingLimitReached, "the owner has too many pending action requests; they must decide some first")
	}),
	web.When(web.Is(approval.ErrKeysUpdate), func(error) *apierror.Error {
		return apierror.Coded(errcode.WebAuthnFailed, "no passkey the gateways pinned signed this change of the owner's passkeys")
	}),
	web.When(web.Is(approval.ErrAssertion), func(err error) *apierror.Error {
		return apierror.Coded(errcode.WebAuthnFailed, "the passkey assertion does not approve this action")
	}),
}

func (a *Actions) fail(w http.ResponseWriter, r *http.Request, err error) {
	a.kit.Error(w, r, errorRules.Answer(err))
}

var errNotPaired = apierror.Coded(errcode.GatewayNotPaired, "")

// filing is the gateway's body: approval.Request in JSON.
type filing struct {
	ID         string          `json:"id"`
	Gateway    string          `json:"gateway"`
	Connection string          `json:"connection_id"`
	Service    string          `json:"service"`
	Namespace  string          `json:"agent_namespace"`
	PublicKey  string          `json:"agent_public_key"`
	AgentName  string          `json:"agent_name"`
	Subject    string          `json:"subject"`
	Target     string          `json:"target"`
	Document   json.RawMessage `json:"document"`
	Digest     string          `json:"digest"`
	ExpiresAt  time.Time       `json:"expires_at"`
}

// file stores a paired gateway's request for its owner's service.
func (a *Actions) file(w http.ResponseWriter, r *http.Request) {
	caller, ok := a.deps.Signed.Verify(w, r)
	if !ok {
		return
	}
	gatewayID, owner, paired, err := a.deps.Paired(r.Context(), caller.Namespace, caller.PublicKey)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !paired {
		apierror.Write(w, r, errNotPaired)
		return
	}
	if !a.deps.Signed.RecordNonce(w, r, caller) || !a.deps.Signed.ReadBody(w, r, caller) {
		return
	}
	var f filing
	if ae := a.kit.Decode(w, r, &f); ae != nil {
		apierror.Write(w, r, ae)
		return
	}
	now := a.kit.Now()
	if problem := a.check(&f, caller.PublicKey, now); problem != "" {
		apierror.Write(w, r, web.Validation("%s", problem))
		return
	}
	owns, err := a.deps.OwnsService(r.Context(), owner, f.Service)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !owns {
		apierror.Write(w, r, apierror.Coded(errcode.ServiceNotFound, "the paired owner has no service of that name"))
		return
	}
	act := Action{ID: f.ID, Namespace: owner, GatewayID: gatewayID, GatewayKey: f.Gateway, Connection: f.Connection, Service: f.Service,
		AgentNS: f.Namespace, AgentKey: f.PublicKey, AgentName: f.AgentName, Subject: f.Subject, Target: f.Target,
		Document: string(f.Document), Digest: f.Digest, Status: StatusPending, CreatedAt: now, ExpiresAt: f.ExpiresAt.UTC()}
	if err := a.store.insert(r.Context(), act, a.cfg.MaxPending, now); err != nil {
		a.fail(w, r, err)
		return
	}
	if a.deps.Requested != nil {
		a.deps.Requested(r.Context(), act)
	}
	apierror.WriteJSON(w, http.StatusCreated, map[string]string{"id": act.ID, "status": act.Status})
}

// check returns what is wrong with a filing, or "". The document must be
// the one the digest covers, so what the owner reads is what is bound.
func (a *Actions) check(f *filing, gatewayKey string, now time.Time) string {
	switch {
	case len(f.ID) < 8 || len(f.ID) > 64:
		return "id must be 8-64 characters"
	case f.Gateway != gatewayKey:
		return "gateway must be the signing key of the request"
	case f.Connection == "" || f.Service == "" || f.Namespace == "" || f.PublicKey == "" || f.Target == "":
		return "connection_id, service, agent_namespace, agent_public_key and target are required"
	case len(f.Document) == 0 || len(f.Document) > a.cfg.MaxDocument:
		return "document must be present and at most " + strconv.Itoa(a.cfg.MaxDocument) + " bytes"
	case approval.Digest(f.Document) != f.Digest:
		return "digest is not the SHA-256 of document"
	case !f.ExpiresAt.After(now) || f.ExpiresAt.After(now.Add(approval.DefaultTTL*6)):
		return "expires_at must be in the next hour"
	}
	var doc struct {
		Target string `json:"target"`
	}
	if json.Unmarshal(f.Document, &doc) != nil || doc.Target != f.Target {
		return "document must be a JSON object naming target"
	}
	return ""
}

// decision is the gateway's view of a request.
type decision struct {
	ID        string              `json:"id"`
	Status    string              `json:"status"`
	Uses      int                 `json:"uses,omitempty"`
	Until     string              `json:"until,omitempty"`
	Assertion *approval.Assertion `json:"assertion,omitempty"`
}

// status answers the filing gateway with its request's decision.
func (a *Actions) status(w http.ResponseWriter, r *http.Request) {
	caller, ok := a.deps.Signed.Verify(w, r)
	if !ok {
		return
	}
	_, _, paired, err := a.deps.Paired(r.Context(), caller.Namespace, caller.PublicKey)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !paired {
		apierror.Write(w, r, errNotPaired)
		return
	}
	if !a.deps.Signed.RecordNonce(w, r, caller) {
		return
	}
	act, err := a.store.byGateway(r.Context(), caller.PublicKey, r.PathValue("id"), a.kit.Now())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	d := decision{ID: act.ID, Status: act.Status}
	if act.Status == StatusApproved {
		d.Uses, d.Assertion = act.Uses, act.Assertion
		if !act.Until.IsZero() {
			d.Until = web.Timestamp(act.Until)
		}
	}
	apierror.WriteJSON(w, http.StatusOK, d)
}

// view is the owner's view of a request: everything, arguments included.
type view struct {
	ID         string          `json:"id"`
	Status     string          `json:"status"`
	GatewayID  string          `json:"gateway_id"`
	Connection string          `json:"connection_id"`
	Service    string          `json:"service"`
	AgentNS    string          `json:"agent_namespace"`
	AgentKey   string          `json:"agent_public_key"`
	AgentName  string          `json:"agent_name,omitempty"`
	Subject    string          `json:"subject,omitempty"`
	Target     string          `json:"target"`
	Document   json.RawMessage `json:"document"`
	Digest     string          `json:"digest"`
	CreatedAt  string          `json:"created_at"`
	ExpiresAt  string          `json:"expires_at"`
	Uses       int             `json:"uses,omitempty"`
	Until      string          `json:"until,omitempty"`
}

// View is the owner's JSON form of act.
func View(act Action) any {
	v := view{ID: act.ID, Status: act.Status, GatewayID: act.GatewayID, Connection: act.Connection, Service: act.Service,
		AgentNS: act.AgentNS, AgentKey: act.AgentKey, AgentName: act.AgentName, Subject: act.Subject, Target: act.Target,
		Document: json.RawMessage(act.Document), Digest: act.Digest, CreatedAt: web.Timestamp(act.CreatedAt),
		ExpiresAt: web.Timestamp(act.ExpiresAt), Uses: act.Uses}
	if !act.Until.IsZero() {
		v.Until = web.Timestamp(act.Until)
	}
	return v
}

func (a *Actions) list(w http.ResponseWriter, r *http.Request, ns string) {
	acts, err := a.Pending(r.Context(), ns)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]any, 0, len(acts))
	for _, act := range acts {
		out = append(out, View(act))
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"actions": out})
}

func (a *Actions) get(w http.ResponseWriter, r *http.Request, ns string) {
	act, err := a.Get(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, View(act))
}

// terms are the owner's choice: how many calls, and for how long past
// the request's expiry.
type terms struct {
	Uses         int `json:"uses"`
	UntilMinutes int `json:"until_minutes"`
}

// until checks the terms and returns the end of the window they ask for:
// zero for none, else UntilMinutes past the request's expiry.
func (t terms) until(act Action) (time.Time, string) {
	switch {
	case t.Uses < 1 || t.Uses > approval.MaxUses:
		return time.Time{}, "uses must be 1-" + strconv.Itoa(approval.MaxUses)
	case t.UntilMinutes < 0 || time.Duration(t.UntilMinutes)*time.Minute > approval.MaxWindow:
		return time.Time{}, "until_minutes must be 0-" + strconv.Itoa(int(approval.MaxWindow/time.Minute))
	case t.UntilMinutes == 0:
		return time.Time{}, ""
	}
	return act.ExpiresAt.Add(time.Duration(t.UntilMinutes) * time.Minute), ""
}

// challenge gives the dashboard what navigator.credentials.get needs to
// approve act with the query's terms: the challenge and the owner's
// credentials.
func (a *Actions) challenge(w http.ResponseWriter, r *http.Request, ns string) {
	act, err := a.Get(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	t := terms{Uses: 1}
	if v := r.URL.Query().Get("uses"); v != "" {
		t.Uses, _ = strconv.Atoi(v)
	}
	if v := r.URL.Query().Get("until_minutes"); v != "" {
		t.UntilMinutes, _ = strconv.Atoi(v)
	}
	until, problem := t.until(act)
	if problem != "" {
		apierror.Write(w, r, web.Validation("%s", problem))
		return
	}
	keys, err := a.deps.Keys(r.Context(), ns)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ids := make([]string, 0, len(keys.Keys))
	for _, k := range keys.Keys {
		ids = append(ids, base64.RawURLEncoding.EncodeToString(k.CredentialID))
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{
		"challenge":         base64.RawURLEncoding.EncodeToString(approval.Challenge(act.Grant(t.Uses, until))),
		"rp_id":             keys.RPID,
		"credential_ids":    ids,
		"user_verification": "required",
	})
}

// approvalBody is the owner's approve body.
type approvalBody struct {
	terms
	Assertion *approval.Assertion `json:"assertion"`
}

// approve records the owner's approval once its assertion verifies
// against the owner's passkeys for this request and these terms.
func (a *Actions) approve(w http.ResponseWriter, r *http.Request, ns string) {
	var body approvalBody
	if ae := a.kit.Decode(w, r, &body); ae != nil {
		apierror.Write(w, r, ae)
		return
	}
	act, err := a.Get(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if act.Status != StatusPending {
		a.fail(w, r, errConflict)
		return
	}
	until, problem := body.until(act)
	if problem != "" || body.Assertion == nil {
		apierror.Write(w, r, web.Validation("%s", cmp.Or(problem, "assertion is required")))
		return
	}
	keys, err := a.deps.Keys(r.Context(), ns)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := keys.Verify(body.Assertion, approval.Challenge(act.Grant(body.Uses, until))); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.store.decide(r.Context(), ns, act.ID, StatusApproved, body.Uses, until, body.Assertion, a.kit.Now()); err != nil {
		a.fail(w, r, err)
		return
	}
	act, err = a.Get(r.Context(), ns, act.ID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, View(act))
}

// deny records the owner's denial; it needs no passkey, since it
// releases nothing.
func (a *Actions) deny(w http.ResponseWriter, r *http.Request, ns string) {
	if r.ContentLength > 0 {
		if _, ae := a.kit.ReadBody(r); ae != nil {
			apierror.Write(w, r, ae)
			return
		}
	}
	id := r.PathValue("id")
	if err := a.store.decide(r.Context(), ns, id, StatusDenied, 0, time.Time{}, nil, a.kit.Now()); err != nil {
		a.fail(w, r, err)
		return
	}
	act, err := a.Get(r.Context(), ns, id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, View(act))
}
