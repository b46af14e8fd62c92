package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpproxy/mcpsettings"
)

// The operations below are the admin API in Go. Each HTTP route reads its
// request, runs one of them and writes what it returns; a caller in the
// same process (the pairing client's RPCs) runs them directly. A body is
// the JSON the route takes. An error is answered as Problem says.
//
// A change of where or how a stored secret is sent needs a context from
// OwnerContext (the HTTP routes give it to a request that presented the
// admin token). Test and discover run no GuardCheck: it guards the HTTP
// routes, and an in-process caller already holds the vault.

// ListConnections returns every connection as the API shows it.
func (h *Handler) ListConnections() []*credvault.Connection {
	return shownAll(h.cfg.Vault.Connections())
}

// GetConnection returns one connection as the API shows it.
func (h *Handler) GetConnection(id string) (*credvault.Connection, error) {
	c, err := h.cfg.Vault.Connection(id)
	if err != nil {
		return nil, err
	}
	return shown(c), nil
}

// CreateConnection stores the connection that body describes (its fields,
// id and secrets).
func (h *Handler) CreateConnection(ctx context.Context, body []byte) (*credvault.Connection, error) {
	c, secrets, err := parseCreate(body)
	if err != nil {
		return nil, err
	}
	if !maySendSecretsElsewhere(ctx) {
		if keys := referencedVariables(secrets); len(keys) > 0 {
			return nil, needsToken("a secret that references a credential variable sends that stored value").With("variables", keys)
		}
	}
	if err := h.checkConnection(ctx, c); err != nil {
		return nil, err
	}
	created, err := h.cfg.Vault.Create(ctx, c, secrets)
	if err != nil {
		return nil, err
	}
	h.log.Info("admin: connection created", "connection", created.ID, "request_id", apierror.RequestIDFrom(ctx))
	return shown(created), nil
}

// UpdateConnection changes the fields that body names.
func (h *Handler) UpdateConnection(ctx context.Context, id string, body []byte) (*credvault.Connection, error) {
	obj, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	if err := h.checkServiceChange(ctx, id, obj); err != nil {
		return nil, err
	}
	updated, err := h.cfg.Vault.Update(ctx, id, func(c *credvault.Connection) error {
		before := c.Clone()
		if err := applyFields(c, obj, nil); err != nil {
			return err
		}
		if lifted := liftedApprovals(before, c); len(lifted) > 0 && relayed(ctx) {
			return apierror.Coded(errcode.AdminTokenRequired, "removing "+strings.Join(lifted, ", ")+
				" lifts a hold only the owner's passkey may release; the control plane cannot relay it, so the gateway's operator makes it "+
				"with the admin token").With("fields", lifted)
		}
		if maySendSecretsElsewhere(ctx) {
			return nil
		}
		if fields := h.cfg.Vault.SecretRouteChanges(before, c); len(fields) > 0 {
			return needsToken("changing "+strings.Join(fields, ", ")).With("fields", fields)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	h.log.Info("admin: connection updated", "connection", id, "request_id", apierror.RequestIDFrom(ctx))
	return shown(updated), nil
}

// DeleteConnection removes a connection and its secrets.
func (h *Handler) DeleteConnection(ctx context.Context, id string) error {
	res, found := h.cfg.Vault.Lookup(id)
	if err := h.cfg.Vault.Delete(ctx, id); err != nil {
		return err
	}
	if found {
		for _, refresh := range res.AccountTokens() { // the connected accounts die with it
			revokeAtProvider(ctx, h.cfg.RevokeAccount, h.log, res, refresh)
		}
	}
	h.log.Info("admin: connection deleted", "connection", id, "request_id", apierror.RequestIDFrom(ctx))
	return nil
}

type rotateRequest struct {
	Secrets   map[string]*string `json:"secrets"`
	RotatedBy string             `json:"rotated_by"`
	Reason    string             `json:"reason"`
}

// RotateConnection replaces a connection's secrets. An empty rotated_by
// in body means subject.
func (h *Handler) RotateConnection(ctx context.Context, id string, body []byte, subject string) (*credvault.Connection, error) {
	var req rotateRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if !maySendSecretsElsewhere(ctx) {
		return nil, needsToken("replacing the secrets a connection sends")
	}
	by := req.RotatedBy
	if by == "" {
		by = subject
	}
	c, err := h.cfg.Vault.Rotate(ctx, id, credvault.Rotation{Secrets: req.Secrets, RotatedBy: by, Reason: req.Reason})
	if err != nil {
		return nil, err
	}
	h.log.Info("admin: credentials rotated", "connection", id, "secret_version", c.SecretVersion, "request_id", apierror.RequestIDFrom(ctx))
	return shown(c), nil
}

// TestConnection tests a connection with its stored credential: an HTTP
// request that body may describe, or an MCP handshake (Config.TestMCP).
// It records the outcome as the connection's last_test and returns it.
func (h *Handler) TestConnection(ctx context.Context, id string, body []byte) (any, error) {
	c, err := h.cfg.Vault.Connection(id)
	if err != nil {
		return nil, err
	}
	return h.test(ctx, c, body)
}

func (h *Handler) test(ctx context.Context, c *credvault.Connection, body []byte) (any, error) {
	var req testRequest
	if len(body) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			return nil, err
		}
	}
	if c.Protocol == credvault.ProtocolMCP && h.cfg.TestMCP != nil {
		if field := req.httpField(); field != "" {
			return nil, badRequest("an mcp connection is tested with an MCP handshake, which takes no "+field).With("field", field)
		}
		return h.testMCP(ctx, c)
	}
	tr := credvault.TestRequest{Method: req.Method, Path: req.Path, Header: http.Header{}}
	for k, v := range req.Headers {
		tr.Header.Set(k, v)
	}
	if req.Body != nil {
		tr.Body = []byte(*req.Body)
	}
	base := h.cfg.TestTransport
	if r, ok := h.cfg.Vault.Lookup(c.ID); ok && c.OAuth() && h.cfg.OAuthTransport != nil {
		base = h.cfg.OAuthTransport(r, base)
	}
	res, err := h.cfg.Vault.Test(ctx, c.ID, tr, base)
	if err != nil {
		return nil, err
	}
	h.log.Info("admin: connection tested", "connection", c.ID, "ok", res.OK, "status", res.Status, "request_id", apierror.RequestIDFrom(ctx))
	return res, nil
}

// testMCP tests c with Config.TestMCP and records the outcome as the
// connection's last_test, as an HTTP probe is.
func (h *Handler) testMCP(ctx context.Context, c *credvault.Connection) (any, error) {
	reqCtx := ctx
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, credvault.DefaultTestTimeout)
		defer cancel()
	}
	start := time.Now()
	hs, err := h.cfg.TestMCP(ctx, c)
	if errors.Is(err, credvault.ErrNotFound) { // deleted meanwhile
		return nil, err
	}
	res := mcpTestResult{TestResult: credvault.TestResult{
		OK: err == nil, Status: hs.Status, LatencyMS: time.Since(start).Milliseconds(), TestedAt: time.Now().UTC(),
	}}
	if err != nil {
		res.Error = err.Error()
	}
	if hs.ServerName != "" || hs.ProtocolVersion != "" {
		res.MCP = &hs
	}
	// Recorded even when the caller has gone: the handshake did happen.
	if err := h.cfg.Vault.RecordTest(context.WithoutCancel(ctx), c.ID, res.TestResult); err != nil {
		return nil, err
	}
	h.log.Info("admin: connection tested", "connection", c.ID, "ok", res.OK, "status", res.Status, "protocol", c.Protocol, "request_id", apierror.RequestIDFrom(reqCtx))
	return res, nil
}

// DiscoverConnection runs Config.Discover on an mcp connection; refresh is
// "force" (also for "") or "auto".
func (h *Handler) DiscoverConnection(ctx context.Context, id, refresh string) (mcpsettings.Discovery, error) {
	if err := checkRefresh(&refresh); err != nil {
		return mcpsettings.Discovery{}, err
	}
	c, err := h.cfg.Vault.Connection(id)
	if err != nil {
		return mcpsettings.Discovery{}, err
	}
	return h.discover(ctx, c, refresh)
}

func checkRefresh(refresh *string) error {
	switch *refresh {
	case "":
		*refresh = "force"
	case "force", "auto":
	default:
		return badRequest("refresh must be force or auto").With("field", "refresh")
	}
	return nil
}

func (h *Handler) discover(ctx context.Context, c *credvault.Connection, refresh string) (mcpsettings.Discovery, error) {
	if c.Protocol != credvault.ProtocolMCP {
		return mcpsettings.Discovery{}, badRequest("discovery needs an mcp connection").With("field", "protocol")
	}
	if h.cfg.Discover == nil {
		return mcpsettings.Discovery{}, apierror.Coded(errcode.DiscoveryUnavailable, "")
	}
	res, err := h.cfg.Discover(ctx, c, refresh)
	if err != nil && !answered(err) {
		h.log.Warn("admin: discovery failed", "connection", c.ID, "err", err, "request_id", apierror.RequestIDFrom(ctx))
		return mcpsettings.Discovery{}, apierror.Coded(errcode.UpstreamError, "MCP discovery failed")
	}
	return res, err
}

// ListVariables returns the credential variables, without their values.
func (h *Handler) ListVariables() []credvault.Variable {
	vars := h.cfg.Vault.Variables()
	if vars == nil {
		vars = []credvault.Variable{} // an empty array, as the document promises
	}
	return vars
}

type variableRequest struct {
	Key              string `json:"key"`
	Value            string `json:"value"`
	CreatedBySubject string `json:"created_by_subject"`
}

// PutVariable writes the credential variable body describes; created
// reports a new key. A non-empty subject overrides created_by_subject.
func (h *Handler) PutVariable(ctx context.Context, body []byte, subject string) (v credvault.Variable, created bool, err error) {
	var req variableRequest
	if err := decodeStrict(body, &req); err != nil {
		return v, false, err
	}
	if !maySendSecretsElsewhere(ctx) {
		users, err := h.cfg.Vault.VariableUsers(ctx, req.Key)
		if err != nil {
			return v, false, err
		}
		if len(users) > 0 {
			return v, false, needsToken("the value of a credential variable that connections reference").With("connections", users)
		}
	}
	if subject == "" {
		subject = req.CreatedBySubject
	}
	if v, created, err = h.cfg.Vault.PutVariable(ctx, req.Key, req.Value, subject); err != nil {
		return v, false, err
	}
	h.log.Info("admin: credential variable written", "key", v.Key, "version", v.Version, "request_id", apierror.RequestIDFrom(ctx))
	return v, created, nil
}

// DeleteVariable removes a credential variable; one that connections
// reference only when force is set.
func (h *Handler) DeleteVariable(ctx context.Context, key string, force bool) error {
	if err := h.cfg.Vault.DeleteVariable(ctx, key, force); err != nil {
		return err
	}
	h.log.Info("admin: credential variable deleted", "key", key, "forced", force, "request_id", apierror.RequestIDFrom(ctx))
	return nil
}

// liftedApprovals names the approval lists from which after drops a
// pattern of before: what would let a held call through unapproved. A
// subject's lists are named approval_subjects; subjects compare as the
// gateway matches them (approval.Policy), so respelling one lifts nothing.
func liftedApprovals(before, after *credvault.Connection) []string {
	var lifted []string
	for _, f := range []struct {
		name          string
		before, after []string
	}{{"approval_tools", before.ApprovalTools, after.ApprovalTools}, {"approval_routes", before.ApprovalRoutes, after.ApprovalRoutes}} {
		if dropsOne(f.before, f.after) {
			lifted = append(lifted, f.name)
		}
	}
	held := approval.NewPolicy(approval.Rules{}, after.ApprovalSubjects)
	for s, r := range before.ApprovalSubjects {
		now := held.Subject(s)
		if dropsOne(r.Tools, now.Tools) || dropsOne(r.Routes, now.Routes) {
			return append(lifted, "approval_subjects")
		}
	}
	return lifted
}

// dropsOne reports whether after lacks a pattern of before.
func dropsOne(before, after []string) bool {
	for _, p := range before {
		if !slices.Contains(after, p) {
			return true
		}
	}
	return false
}
