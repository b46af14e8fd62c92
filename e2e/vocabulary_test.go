package e2e

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
)

// withCertificate returns id with its certificate replaced by one issued
// for the same namespace and key between issued and expires.
func withCertificate(t *testing.T, id *identity.Identity, issued, expires time.Time) *identity.Identity {
	t.Helper()
	rec, err := id.MarshalRecord()
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(rec, &fields); err != nil {
		t.Fatal(err)
	}
	var seed string
	if err := json.Unmarshal(fields["privateKey"], &seed); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(seed)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := identity.IssueCertificate(id.Namespace, ed25519.NewKeyFromSeed(raw), issued, expires)
	if err != nil {
		t.Fatal(err)
	}
	if fields["certificate"], err = json.Marshal(cert); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	out, err := identity.ParseRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOneVocabularyOnBothServers sends the same bad requests to a signed
// route of the gateway (a proxied GET) and of the control plane (the
// namespace lookup) and wants the same code and status from both: a
// signature that does not verify, a replayed request, and a certificate
// that expired, each from an agent whose claim is approved; and a browser
// request from a foreign origin to each server's management routes.
func TestOneVocabularyOnBothServers(t *testing.T) {
	w := newWorld(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(upstream.Close)
	gw := startGateway(t, w, nil, bearer("gh", upstream.URL, "upstream-token-1"))
	client := &http.Client{Timeout: 10 * time.Second}
	servers := []struct{ name, url string }{
		{"gateway", gw.url + "/proxy/gh/repos"},
		{"control plane", w.cp.url() + "/v1/namespaces/acme"},
	}
	eventually(t, 10*time.Second, "the gateway to admit the approved agent", func() bool {
		return call(t, client, "GET", servers[0].url, w.agent, nil).status == http.StatusOK
	})

	expired := withCertificate(t, w.agent, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	attacks := []struct {
		name string
		want errcode.Code
		// send makes the attack on url and returns the answer to judge.
		send func(t *testing.T, url string) answer
	}{
		{"signature_that_does_not_verify", errcode.AuthSignatureInvalid, func(t *testing.T, url string) answer {
			req, _ := http.NewRequest("GET", url, nil)
			if err := w.agent.Sign(req, identity.SignOptions{}); err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Signature", "sig1=:"+base64.StdEncoding.EncodeToString(make([]byte, ed25519.SignatureSize))+":")
			a, err := do(client, req)
			if err != nil {
				t.Fatal(err)
			}
			return a
		}},
		{"replayed_request", errcode.AuthReplayDetected, func(t *testing.T, url string) answer {
			req, _ := http.NewRequest("GET", url, nil)
			if err := w.agent.Sign(req, identity.SignOptions{}); err != nil {
				t.Fatal(err)
			}
			first, err := do(client, req.Clone(req.Context()))
			if err != nil || first.status != http.StatusOK {
				t.Fatalf("the original request: %d %s, %v", first.status, first.body, err)
			}
			a, err := do(client, req)
			if err != nil {
				t.Fatal(err)
			}
			return a
		}},
		{"expired_agent_certificate", errcode.AuthIdentityInvalid, func(t *testing.T, url string) answer {
			return call(t, client, "GET", url, expired, nil)
		}},
	}
	for _, at := range attacks {
		t.Run(at.name, func(t *testing.T) {
			var answers []string
			for _, s := range servers {
				a := at.send(t, s.url)
				e, err := a.envelope()
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				got, ok := errcode.Parse(e.Code)
				if !ok || got != at.want || a.status != at.want.Status() {
					t.Errorf("%s answers %d %s, want %d %s", s.name, a.status, e.Code, at.want.Status(), at.want)
				}
				answers = append(answers, s.name+": "+http.StatusText(a.status)+" "+e.Code)
			}
			t.Log(strings.Join(answers, "; "))
		})
	}

	// A browser page of another origin: the gateway's admin API and an
	// owner route of the control plane refuse it alike.
	t.Run("request_from_a_foreign_browser_origin", func(t *testing.T) {
		for _, r := range []struct{ name, method, url string }{
			{"gateway", "GET", gw.url + "/api/admin/connections"},
			{"control plane", "POST", w.cp.url() + "/v1/auth/logout"},
		} {
			req, _ := http.NewRequest(r.method, r.url, nil)
			req.Header.Set("Origin", "https://evil.example")
			a, err := do(client, req)
			if err != nil {
				t.Fatal(err)
			}
			e, err := a.envelope()
			if err != nil {
				t.Fatalf("%s: %v", r.name, err)
			}
			if got, _ := errcode.Parse(e.Code); got != errcode.OriginForbidden || a.status != errcode.OriginForbidden.Status() {
				t.Errorf("%s answers %d %s, want %d %s", r.name, a.status, e.Code, errcode.OriginForbidden.Status(), errcode.OriginForbidden)
			}
		}
	})
}
