package proxy

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/idnhq/idn/apierror"
)

// Health serves the gateway's health endpoints:
//
//	GET /health        {"status":"ok","version":…}
//	GET /health/live   {"status":"ok"}
//	GET /health/ready  {"status":"ready"|"not_ready","checks":{name: "ok"|error}}, 503 when not ready
//
// Mount it at /health and /health/ (it dispatches on the path).
type Health struct {
	Version string
	// Checks run on every readiness request, each bounded by CheckTimeout.
	// A nil or empty map is always ready.
	Checks map[string]func(context.Context) error
	// CheckTimeout bounds each check; zero means 2 seconds.
	CheckTimeout time.Duration
}

func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/health":
		apierror.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": h.Version})
	case "/health/live":
		apierror.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	case "/health/ready":
		status, checks := h.ready(r.Context())
		code := http.StatusOK
		if status != "ready" {
			code = http.StatusServiceUnavailable
		}
		apierror.WriteJSON(w, code, map[string]any{"status": status, "checks": checks})
	default:
		http.NotFound(w, r)
	}
}

func (h *Health) ready(ctx context.Context) (string, map[string]string) {
	timeout := h.CheckTimeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	names := make([]string, 0, len(h.Checks))
	for name := range h.Checks {
		names = append(names, name)
	}
	sort.Strings(names)
	status, out := "ready", make(map[string]string, len(names))
	for _, name := range names {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := h.Checks[name](cctx)
		cancel()
		out[name] = "ok"
		if err != nil {
			status, out[name] = "not_ready", err.Error()
		}
	}
	return status, out
}
