package admin

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/replay"
)

// TestSignedChecksCoverTheBody runs signed test requests over the wire
// against a guard that is a real idn-rfc9421-v1 verifier: the guard must
// see the body as it arrived, so a signature that does not cover the body
// the handler acts on is refused before the upstream is probed.
func TestSignedChecksCoverTheBody(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var probed []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		probed = append(probed, r.URL.Path)
		mu.Unlock()
	}))
	t.Cleanup(up.Close)
	nonces, err := replay.New(replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	verifier := &identity.Verifier{Nonces: nonces}
	e := newEnv(t, func(c *Config) {
		c.GuardCheck = func(r *http.Request, _ *credvault.Connection) error {
			_, err := verifier.Verify(r)
			return err
		}
	})
	wantStatus(t, e.do("POST", "/api/admin/connections", fmt.Sprintf(
		`{"id":"gh","base_url":%q,"auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":"t0k3n-value"}}`, up.URL)), 201, "")
	srv := httptest.NewServer(e.handler)
	t.Cleanup(srv.Close)
	agent, err := identity.New("acme-bot")
	if err != nil {
		t.Fatal(err)
	}

	const signedBody = `{"method":"GET","path":"/signed"}`
	const evilBody = `{"method":"GET","path":"/attacker-chosen"}`
	rows := []struct {
		name   string
		signed string // body under the signature ("" = signed without body)
		sent   string // body on the wire
		// tamper adjusts the request after signing.
		tamper  func(r *http.Request)
		chunked bool
		want    int
		probe   string // path the upstream must have seen, "" = none
	}{
		{name: "signed_body_is_probed", signed: signedBody, sent: signedBody, want: 200, probe: "/signed"},
		{name: "signature_made_without_body_then_body_added", signed: "", sent: evilBody, want: 403},
		{name: "signature_made_without_body_then_chunked_body_added", signed: "", sent: evilBody, chunked: true, want: 403},
		{name: "unsigned_content_digest_added_with_body", signed: "", sent: evilBody, want: 403, tamper: func(r *http.Request) {
			d, _ := httpsig.ContentDigest(httpsig.DigestSHA256, []byte(evilBody))
			r.Header.Set("Content-Digest", d)
		}},
		{name: "digest_mismatch_body_swapped", signed: signedBody, sent: evilBody, want: 403},
		{name: "digest_mismatch_chunked_body_swapped", signed: signedBody, sent: evilBody, chunked: true, want: 403},
		{name: "signed_digest_header_removed", signed: signedBody, sent: signedBody, want: 403, tamper: func(r *http.Request) {
			r.Header.Del("Content-Digest")
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			mu.Lock()
			probed = nil
			mu.Unlock()
			var body io.Reader
			if row.signed != "" {
				body = strings.NewReader(row.signed)
			}
			req, err := http.NewRequest("POST", srv.URL+"/api/admin/connections/gh/test", body)
			if err != nil {
				t.Fatal(err)
			}
			if err := agent.Sign(req, identity.SignOptions{}); err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Body, req.GetBody = io.NopCloser(strings.NewReader(row.sent)), nil
			req.ContentLength = int64(len(row.sent))
			if row.chunked {
				req.ContentLength = -1
			}
			if row.tamper != nil {
				row.tamper(req)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != row.want {
				t.Fatalf("status = %d, want %d (%s)", res.StatusCode, row.want, answer)
			}
			mu.Lock()
			defer mu.Unlock()
			if got := strings.Join(probed, ","); got != row.probe {
				t.Fatalf("upstream probed %q, want %q", got, row.probe)
			}
		})
	}
}
