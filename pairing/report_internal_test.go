package pairing

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing/pairwire"
)

// FuzzAppendBatch: whatever an agent names itself, its subject or a tool
// is called, a batch is valid JSON that decodes to the record, clipped to the control
// plane's bounds and cleaned of control characters.
func FuzzAppendBatch(f *testing.F) {
	for _, s := range []string{"bot", `a"b\c`, "line\nbreak", "\xff\xfe", strings.Repeat("é", 80), "\u2028", "😀"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, name, tool string) {
		a := Activity{At: time.Unix(1700000000, 5).UTC(), AgentName: name, Connection: "c", Method: "GET", Tool: tool, Allowed: true,
			Status: 200, Latency: 1234 * time.Microsecond, OAuthAccount: true, Account: name, AccountNeedsReconnecting: true}
		var got pairwire.ActivityBatch
		counts := map[unverifiedKind]unverifiedCount{{mcp: true, reason: tool}: {at: a.At, n: 7}}
		b := appendBatch(nil, []Activity{a}, 3, counts)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q is not JSON: %v", b, err)
		}
		if len(got.Records) != 1 || got.Dropped != 3 || len(got.Unverified) != 1 {
			t.Fatalf("decoded %+v", got)
		}
		if c := got.Unverified[0]; c.Count != 7 || c.Protocol != "mcp" || len(c.Reason) > 64 || c.At != "2023-11-14T22:13:20.000000005Z" {
			t.Errorf("count %+v", c)
		}
		w := got.Records[0]
		if w.Account == nil || !w.AccountNeedsReconnecting {
			t.Fatalf("the record names no account: %s", b)
		}
		for _, c := range []struct {
			in, out string
			max     int
		}{{name, w.AgentName, 128}, {tool, w.Tool, 128}, {name, *w.Account, 256}} {
			if len(c.out) > c.max || !utf8.ValidString(c.out) || strings.ContainsFunc(c.out, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Errorf("field %q of %q is not clean", c.out, c.in)
			}
			if clean := strings.Map(func(r rune) rune { return r }, c.in); len(clean) <= c.max/2 && !strings.ContainsFunc(clean, func(r rune) bool { return r < 0x20 || r == 0x7f }) && c.out != clean {
				t.Errorf("a clean field %q became %q", c.in, c.out)
			}
		}
		if w.At != "2023-11-14T22:13:20.000000005Z" || w.Decision != "allow" || w.Protocol != "http" || w.LatencyMS != 1.234 || w.Status != 200 {
			t.Errorf("record %+v", w)
		}
	})
}

// BenchmarkReport is the whole cost of reporting one decision: Record on
// the request path, then its share of a batch's JSON, signature and POST
// (to a RoundTripper that reads the body and answers in process). Set
// against a gateway's CPU time per request (proxy's
// BenchmarkActivityReportingCPU, "off"), it is the share of the gateway's
// req/s that reporting takes once the gateway is CPU-bound.
func BenchmarkReport(b *testing.B) {
	id, err := identity.New("gw-host")
	if err != nil {
		b.Fatal(err)
	}
	r, err := NewReporter(ReporterConfig{ControlPlaneURL: "http://control-plane.invalid", Identity: id, Transport: discarding{}})
	if err != nil {
		b.Fatal(err)
	}
	a := Activity{At: time.Now(), AgentName: "weather-bot", AgentKey: "ed25519:" + strings.Repeat("A", 43), Connection: "github",
		Service: "github", Method: "GET", Route: "/repos/octo/issues/{id}", Allowed: true, Status: 200, Latency: 1500 * time.Microsecond}
	ctx := context.Background()
	b.ReportAllocs()
	for i := range b.N {
		r.Record(a)
		if i%pairwire.MaxActivityBatch == pairwire.MaxActivityBatch-1 {
			if err := r.flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := r.flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// discarding reads a request's body and answers 200 in process.
type discarding struct{}

func (discarding) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: r, Header: http.Header{},
		Body: io.NopCloser(strings.NewReader(`{"accepted":500}`)), ContentLength: 16}, nil
}
