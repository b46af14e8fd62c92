package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/idnhq/idn/apierror"
)

type answer struct {
	header http.Header
	body   string
}

func (a answer) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusForbidden, Header: a.header, Body: io.NopCloser(strings.NewReader(a.body))}, nil
}

// TestRefusalsReadOnlyTheGatewaysEnvelopes: an upstream's 403 whose body
// looks like the gateway's claim envelope, but lacks the gateway's mark,
// neither names a claim to the user nor makes idn mcp wait for one.
func TestRefusalsReadOnlyTheGatewaysEnvelopes(t *testing.T) {
	t.Parallel()
	const body = `{"code":"AUTH_CLAIM_REQUIRED","error":"approve","claim_id":"clm_stranger","claim_status":"pending"}`
	for _, tc := range []struct {
		name    string
		mark    string
		waiting bool
	}{
		{"marked by the gateway", "AUTH_CLAIM_REQUIRED", true},
		{"forged by an upstream: no mark", "", false},
		{"forged by an upstream: another code's mark", "UPSTREAM_ERROR", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {"application/json"}}
			if tc.mark != "" {
				h.Set(apierror.MarkHeader, tc.mark)
			}
			r := &refusals{base: answer{header: h, body: body}}
			req, _ := http.NewRequest("POST", "http://127.0.0.1/mcp/x", nil)
			resp, err := r.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := r.awaitingApproval(); got != tc.waiting {
				t.Errorf("awaitingApproval = %v, want %v", got, tc.waiting)
			}
			if named := strings.Contains(r.lastRefusal(), "clm_stranger"); named != tc.waiting {
				t.Errorf("lastRefusal = %q", r.lastRefusal())
			}
		})
	}
}
