package proxy

import (
	"net/http"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
)

// serveMCP hands an admitted request to the MCP engine. The engine records
// the decisions it makes (RecordedElsewhere); an error it answered without
// one, such as the 400 of a request that names no session, is recorded
// here as a refusal, so every signed request the pipeline admitted leaves
// a record.
func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request, caller *identity.Caller, res *credvault.Resolved) {
	n := noteFrom(r.Context())
	if n == nil {
		h.cfg.MCP.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	h.cfg.MCP.ServeHTTP(sw, r)
	if sw.status >= http.StatusBadRequest && !n.elsewhere.Load() {
		h.recordActivity(r, caller, res.Connection.ServiceSlug(), false, "", sw.status)
	}
}

// statusWriter remembers the status of the answer it passes on.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= http.StatusOK {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a flush on, for the engine's event streams.
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the writer's other controls.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
