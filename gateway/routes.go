package gateway

import (
	"context"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
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
