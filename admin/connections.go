package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/internal/apierror"
)

func (h *Handler) listConnections(w http.ResponseWriter, r *http.Request) {
	apierror.WriteJSON(w, http.StatusOK, shownAll(h.cfg.Vault.Connections()))
}

func (h *Handler) getConnection(w http.ResponseWriter, r *http.Request) {
	c, err := h.cfg.Vault.Connection(r.PathValue("id"))
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, shown(c))
}

func (h *Handler) createConnection(w http.ResponseWriter, r *http.Request) {
	c, secrets, err := h.decodeCreate(w, r)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	if !maySendSecretsElsewhere(r) {
		if keys := referencedVariables(secrets); len(keys) > 0 {
			writeError(w, r, h.log, needsToken("a secret that references a credential variable sends that stored value").With("variables", keys))
			return
		}
	}
	if err := h.checkConnection(r.Context(), c); err != nil {
		writeError(w, r, h.log, err)
		return
	}
	created, err := h.cfg.Vault.Create(r.Context(), c, secrets)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	h.log.Info("admin: connection created", "connection", created.ID, "request_id", apierror.RequestIDFrom(r.Context()))
	apierror.WriteJSON(w, http.StatusCreated, shown(created))
}

// checkConnection runs Config.CheckConnection, when set, on c.
func (h *Handler) checkConnection(ctx context.Context, c *credvault.Connection) error {
	if h.cfg.CheckConnection == nil {
		return nil
	}
	return h.cfg.CheckConnection(ctx, c)
}

// checkServiceChange runs Config.CheckConnection on connection id as the
// fields of obj would leave it, when they change its service slug. A
// field the update will refuse is left for the update to answer.
func (h *Handler) checkServiceChange(ctx context.Context, id string, obj map[string]json.RawMessage) error {
	if h.cfg.CheckConnection == nil {
		return nil
	}
	if _, ok := obj["service"]; !ok {
		return nil
	}
	current, err := h.cfg.Vault.Connection(id)
	if err != nil {
		return nil // the update answers it
	}
	next := current.Clone()
	if applyFields(next, obj, nil) != nil || next.ServiceSlug() == current.ServiceSlug() {
		return nil
	}
	return h.cfg.CheckConnection(ctx, next)
}

func (h *Handler) decodeCreate(w http.ResponseWriter, r *http.Request) (*credvault.Connection, map[string]string, error) {
	body, err := h.readBody(w, r)
	if err != nil {
		return nil, nil, err
	}
	return parseCreate(body)
}

// parseCreate decodes a create body: a connection object with id and
// secrets, writable fields only.
func parseCreate(body []byte) (*credvault.Connection, map[string]string, error) {
	obj, err := decodeObject(body)
	if err != nil {
		return nil, nil, err
	}
	c := &credvault.Connection{}
	var secrets map[string]string
	err = applyFields(c, obj, func(name string, raw json.RawMessage) (bool, error) {
		switch name {
		case "id":
			if json.Unmarshal(raw, &c.ID) != nil {
				return true, badRequest("field id must be a string").With("field", "id")
			}
			return true, nil
		case "secrets":
			if json.Unmarshal(raw, &secrets) != nil {
				return true, badRequest("field secrets must be an object of strings").With("field", "secrets")
			}
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return nil, nil, err
	}
	if err := credvault.ValidateConnectionID(c.ID); err != nil {
		return nil, nil, err
	}
	return c, secrets, nil
}

func (h *Handler) patchConnection(w http.ResponseWriter, r *http.Request) {
	body, err := h.readBody(w, r)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	obj, err := decodeObject(body)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	id := r.PathValue("id")
	if err := h.checkServiceChange(r.Context(), id, obj); err != nil {
		writeError(w, r, h.log, err)
		return
	}
	updated, err := h.cfg.Vault.Update(r.Context(), id, func(c *credvault.Connection) error {
		before := c.Clone()
		if err := applyFields(c, obj, nil); err != nil {
			return err
		}
		if maySendSecretsElsewhere(r) {
			return nil
		}
		if fields := h.cfg.Vault.SecretRouteChanges(before, c); len(fields) > 0 {
			return needsToken("changing "+strings.Join(fields, ", ")).With("fields", fields)
		}
		return nil
	})
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	h.log.Info("admin: connection updated", "connection", id, "request_id", apierror.RequestIDFrom(r.Context()))
	apierror.WriteJSON(w, http.StatusOK, shown(updated))
}

func (h *Handler) deleteConnection(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := h.cfg.Vault.Delete(r.Context(), id); err != nil {
		writeError(w, r, h.log, err)
		return
	}
	h.log.Info("admin: connection deleted", "connection", id, "request_id", apierror.RequestIDFrom(r.Context()))
	w.WriteHeader(http.StatusNoContent)
}

type rotateRequest struct {
	Secrets   map[string]*string `json:"secrets"`
	RotatedBy string             `json:"rotated_by"`
	Reason    string             `json:"reason"`
}

func (h *Handler) rotateConnection(w http.ResponseWriter, r *http.Request) {
	body, err := h.readBody(w, r)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	var req rotateRequest
	if err := decodeStrict(body, &req); err != nil {
		writeError(w, r, h.log, err)
		return
	}
	if !maySendSecretsElsewhere(r) {
		writeError(w, r, h.log, needsToken("replacing the secrets a connection sends"))
		return
	}
	id := r.PathValue("id")
	by := req.RotatedBy
	if by == "" {
		by = r.Header.Get("idn-subject")
	}
	c, err := h.cfg.Vault.Rotate(r.Context(), id, credvault.Rotation{Secrets: req.Secrets, RotatedBy: by, Reason: req.Reason})
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	h.log.Info("admin: credentials rotated", "connection", id, "secret_version", c.SecretVersion, "request_id", apierror.RequestIDFrom(r.Context()))
	apierror.WriteJSON(w, http.StatusOK, shown(c))
}

type testRequest struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Body    *string           `json:"body"`
}

// httpField names a field of req that only an HTTP probe uses; "" when
// it sets none.
func (req testRequest) httpField() string {
	switch {
	case req.Method != "":
		return "method"
	case req.Path != "":
		return "path"
	case req.Headers != nil:
		return "headers"
	case req.Body != nil:
		return "body"
	}
	return ""
}

// lookupGuarded finds the connection and runs GuardCheck on it; without
// one it refuses, unless InsecureUnguardedChecks.
func (h *Handler) lookupGuarded(r *http.Request) (*credvault.Connection, error) {
	c, err := h.cfg.Vault.Connection(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	switch {
	case h.cfg.GuardCheck != nil:
		if err := h.cfg.GuardCheck(r, c); err != nil {
			if answered(err) {
				return nil, err
			}
			h.log.Warn("admin: guard check refused", "connection", c.ID, "err", err, "request_id", apierror.RequestIDFrom(r.Context()))
			return nil, errForbidden
		}
	case !h.cfg.InsecureUnguardedChecks:
		return nil, errForbidden
	}
	return c, nil
}

func (h *Handler) testConnection(w http.ResponseWriter, r *http.Request) {
	// The guard runs on the body as it arrived: read first, the body would
	// be gone, and a signature made without one would authorise any.
	c, err := h.lookupGuarded(r)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	body, err := h.readBody(w, r)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	var req testRequest
	if len(body) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			writeError(w, r, h.log, err)
			return
		}
	}
	if c.Protocol == credvault.ProtocolMCP && h.cfg.TestMCP != nil {
		if field := req.httpField(); field != "" {
			writeError(w, r, h.log, badRequest("an mcp connection is tested with an MCP handshake, which takes no "+field).With("field", field))
			return
		}
		h.testMCP(w, r, c)
		return
	}
	tr := credvault.TestRequest{Method: req.Method, Path: req.Path, Header: http.Header{}}
	for k, v := range req.Headers {
		tr.Header.Set(k, v)
	}
	if req.Body != nil {
		tr.Body = []byte(*req.Body)
	}
	res, err := h.cfg.Vault.Test(r.Context(), c.ID, tr, h.cfg.TestTransport)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	h.log.Info("admin: connection tested", "connection", c.ID, "ok", res.OK, "status", res.Status, "request_id", apierror.RequestIDFrom(r.Context()))
	apierror.WriteJSON(w, http.StatusOK, res)
}

func (h *Handler) discoverConnection(w http.ResponseWriter, r *http.Request) {
	refresh := r.URL.Query().Get("refresh")
	switch refresh {
	case "":
		refresh = "force"
	case "force", "auto":
	default:
		writeError(w, r, h.log, badRequest("refresh must be force or auto").With("field", "refresh"))
		return
	}
	c, err := h.lookupGuarded(r)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	if c.Protocol != credvault.ProtocolMCP {
		writeError(w, r, h.log, badRequest("discovery needs an mcp connection").With("field", "protocol"))
		return
	}
	if h.cfg.Discover == nil {
		apierror.Write(w, r, apierror.Coded(errcode.DiscoveryUnavailable, ""))
		return
	}
	res, err := h.cfg.Discover(r.Context(), c, refresh)
	if err != nil {
		if !answered(err) {
			h.log.Warn("admin: discovery failed", "connection", c.ID, "err", err, "request_id", apierror.RequestIDFrom(r.Context()))
			err = apierror.Coded(errcode.UpstreamError, "MCP discovery failed")
		}
		writeError(w, r, h.log, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, res)
}

// needsToken answers a change of where or how a stored secret is sent
// made without the admin token: from this host too, since any process on
// it (an agent with a shell among them) reaches the admin API as loopback.
func needsToken(what string) *apierror.Error {
	return apierror.Coded(errcode.AdminTokenRequired, what+": this changes where or how a stored secret is sent, "+
		"which needs the admin token even from this host; send Authorization: Bearer <token> "+
		"(GATEWAY_ADMIN_TOKEN, else the admin-token file of the gateway's data directory, which 'gateway admin-token' prints)")
}

// referencedVariables returns the credential variables that secrets
// reference as {{KEY}}, sorted and without duplicates. Malformed
// references are left to the vault's validation.
func referencedVariables(secrets map[string]string) []string {
	var keys []string
	for _, v := range secrets {
		refs, _ := credvault.TemplateReferences(v)
		keys = append(keys, refs...)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
