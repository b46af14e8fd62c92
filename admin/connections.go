package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
)

func (h *Handler) listConnections(w http.ResponseWriter, r *http.Request) {
	apierror.WriteJSON(w, http.StatusOK, h.ListConnections())
}

func (h *Handler) getConnection(w http.ResponseWriter, r *http.Request) {
	c, err := h.GetConnection(r.PathValue("id"))
	h.answer(w, r, http.StatusOK, c, err)
}

func (h *Handler) createConnection(w http.ResponseWriter, r *http.Request) {
	body, err := h.readBody(w, r)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	c, err := h.CreateConnection(r.Context(), body)
	h.answer(w, r, http.StatusCreated, c, err)
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
	c, err := h.UpdateConnection(r.Context(), r.PathValue("id"), body)
	h.answer(w, r, http.StatusOK, c, err)
}

func (h *Handler) deleteConnection(w http.ResponseWriter, r *http.Request) {
	if err := h.DeleteConnection(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, r, h.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) rotateConnection(w http.ResponseWriter, r *http.Request) {
	body, err := h.readBody(w, r)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	by, err := subject(r)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	c, err := h.RotateConnection(r.Context(), r.PathValue("id"), body, by)
	h.answer(w, r, http.StatusOK, c, err)
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
	res, err := h.test(r.Context(), c, body)
	h.answer(w, r, http.StatusOK, res, err)
}

func (h *Handler) discoverConnection(w http.ResponseWriter, r *http.Request) {
	refresh := r.URL.Query().Get("refresh")
	if err := checkRefresh(&refresh); err != nil {
		writeError(w, r, h.log, err)
		return
	}
	c, err := h.lookupGuarded(r)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	res, err := h.discover(r.Context(), c, refresh)
	h.answer(w, r, http.StatusOK, res, err)
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
