package gateway

import (
	"context"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/internal/apierror"
)

// dispatch routes by path prefix. Unlike http.ServeMux it never redirects
// a path that is not clean: runtime paths reach the signed pipeline exactly
// as the agent signed them (it refuses dot-segments itself), and admin paths
// that are not canonical are refused here.
func dispatch(health, metrics, adminAPI, runtime http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/health" || strings.HasPrefix(p, "/health/"):
			health.ServeHTTP(w, r)
		case p == "/metrics":
			metrics.ServeHTTP(w, r)
		case p == "/openapi.json" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			serveOpenAPI(w, r)
		case strings.HasPrefix(p, "/api/admin/"):
			if path.Clean(p) != strings.TrimSuffix(p, "/") {
				apierror.Write(w, r, apierror.Coded(errcode.ValidationError, "admin path is not canonical"))
				return
			}
			adminAPI.ServeHTTP(w, r)
		default:
			runtime.ServeHTTP(w, r)
		}
	})
}

// timeout bounds a handler's context.
func timeout(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// NewServer returns an http.Server for h with the timeouts a gateway is
// meant to be served with: slow or idle clients cannot hold connections
// (slowloris), and there is no write timeout, so streamed responses are
// bounded by the route timeouts instead. The caller serves and shuts it
// down.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// GCPercent is the garbage collector target (GOGC) recommended for a
// process that mostly serves a gateway. A gateway's live heap is small, so
// at Go's default of 100 every few megabytes of per-request garbage start a
// collection; at 3,000 requests/s that is several a second, and requests
// that meet one pay for it at p99 (bench/README.md has the figures). At 400
// the heap may grow to five times the live data before a collection, a few
// tens of megabytes for a typical gateway, and a memory limit caps it
// (cmd/gateway sets one: GATEWAY_MEMORY_LIMIT_BYTES or GOMEMLIMIT).
// cmd/gateway runs at this target, applied by TuneGC to the heap other than
// the claims snapshots, unless GOGC is set.
const GCPercent = 400

// MemoryHeadroom is what cmd/gateway's default memory limit allows beyond
// the nonce store's budget (Config.Nonces.MaxBytes): the claims snapshots
// (about 94 bytes a claim, and a second set while a changed feed is
// rebuilt), connections, buffers and the garbage between two collections.
const MemoryHeadroom = 256 << 20
