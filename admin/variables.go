package admin

import (
	"net/http"
	"strconv"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/internal/apierror"
)

// listVariables answers an array, empty rather than null when there are
// none, as the document promises.
func (h *Handler) listVariables(w http.ResponseWriter, r *http.Request) {
	vars := h.cfg.Vault.Variables()
	if vars == nil {
		vars = []credvault.Variable{}
	}
	apierror.WriteJSON(w, http.StatusOK, vars)
}

type variableRequest struct {
	Key              string `json:"key"`
	Value            string `json:"value"`
	CreatedBySubject string `json:"created_by_subject"`
}

func (h *Handler) putVariable(w http.ResponseWriter, r *http.Request) {
	body, err := h.readBody(w, r)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	var req variableRequest
	if err := decodeStrict(body, &req); err != nil {
		writeError(w, r, h.log, err)
		return
	}
	if !maySendSecretsElsewhere(r) {
		users, err := h.cfg.Vault.VariableUsers(r.Context(), req.Key)
		if err != nil {
			writeError(w, r, h.log, err)
			return
		}
		if len(users) > 0 {
			writeError(w, r, h.log, needsToken("the value of a credential variable that connections reference").With("connections", users))
			return
		}
	}
	v, created, err := h.cfg.Vault.PutVariable(r.Context(), req.Key, req.Value, subject(r, req.CreatedBySubject))
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	h.log.Info("admin: credential variable written", "key", v.Key, "version", v.Version, "request_id", apierror.RequestIDFrom(r.Context()))
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	apierror.WriteJSON(w, status, v)
}

func (h *Handler) deleteVariable(w http.ResponseWriter, r *http.Request) {
	force := false
	if s := r.URL.Query().Get("force"); s != "" {
		var err error
		if force, err = strconv.ParseBool(s); err != nil {
			writeError(w, r, h.log, badRequest("force must be true or false").With("field", "force"))
			return
		}
	}
	key := r.PathValue("key")
	if err := h.cfg.Vault.DeleteVariable(r.Context(), key, force); err != nil {
		writeError(w, r, h.log, err)
		return
	}
	h.log.Info("admin: credential variable deleted", "key", key, "forced", force, "request_id", apierror.RequestIDFrom(r.Context()))
	w.WriteHeader(http.StatusNoContent)
}
