package controlplane

import (
	"net/http"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/kit/textcap"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// traced gives each request a server span that continues the caller's
// traceparent, named for the route pattern that served it ("GET
// /v1/namespaces/{namespace}"), never the request's own path or query,
// which may carry identifiers and tokens. The store's spans are its
// children. With tracing off it is next itself.
func (s *Server) traced(next http.Handler) http.Handler {
	if !s.tracer.On() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := textcap.Method(r.Method) // any token is a method a client can send
		ctx, span := s.tracer.Start(s.tracer.Extract(r.Context(), r.Header), method, trace.SpanKindServer)
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w}
		r = r.WithContext(ctx)
		next.ServeHTTP(rec, r)
		if r.Pattern != "" { // set on r by the ServeMux that served it
			span.SetName(r.Pattern)
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.String("http.request.method", method), attribute.Int("http.response.status_code", status),
			attribute.String("idn.request_id", apierror.RequestIDFrom(ctx)))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
	})
}
