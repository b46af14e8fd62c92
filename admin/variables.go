package admin

import (
	"net/http"
	"strconv"

	"github.com/idnhq/idn/apierror"
)

func (h *Handler) listVariables(w http.ResponseWriter, r *http.Request) {
	apierror.WriteJSON(w, http.StatusOK, h.ListVariables())
}

func (h *Handler) putVariable(w http.ResponseWriter, r *http.Request) {
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
	v, created, err := h.PutVariable(r.Context(), body, by)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	h.answer(w, r, status, v, err)
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
	if err := h.DeleteVariable(r.Context(), r.PathValue("key"), force); err != nil {
		writeError(w, r, h.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
