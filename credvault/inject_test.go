package credvault

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestInject(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		conn      Connection
		url       string
		header    string
		wantValue string
		wantURL   string
	}{
		{"bearer", Connection{AuthMode: AuthBearer, AuthPrefix: "Bearer "}, "https://u.test/x", "Authorization", "Bearer S", "https://u.test/x"},
		{"header_key_default_name", Connection{AuthMode: AuthHeaderKey}, "https://u.test/x", "X-API-Key", "S", "https://u.test/x"},
		{"header_key_custom_prefix", Connection{AuthMode: AuthHeaderKey, AuthHeaderName: "X-Token", AuthPrefix: "tok "}, "https://u.test/x", "X-Token", "tok S", "https://u.test/x"},
		{"query_param_keeps_order", Connection{AuthMode: AuthQueryParam, AuthQueryParam: "key"}, "https://u.test/x?z=1&a=2", "", "", "https://u.test/x?z=1&a=2&key=S"},
		{"query_param_overrides_agent_value", Connection{AuthMode: AuthQueryParam}, "https://u.test/x?api_key=agent&b=1", "", "", "https://u.test/x?b=1&api_key=S"},
		{"no_auth_mode", Connection{}, "https://u.test/x", "Authorization", "", "https://u.test/x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", c.url, nil)
			Inject(req, &c.conn, "S")
			if c.header != "" && req.Header.Get(c.header) != c.wantValue {
				t.Errorf("%s = %q, want %q", c.header, req.Header.Get(c.header), c.wantValue)
			}
			if req.URL.String() != c.wantURL {
				t.Errorf("URL = %s, want %s", req.URL, c.wantURL)
			}
		})
	}
}

func TestUpstreamBase(t *testing.T) {
	t.Parallel()
	c := &Connection{BaseURL: "https://api.example.com/v2/", PathPrefix: "/tenant/1"}
	u, err := c.UpstreamBase()
	if err != nil || u.String() != "https://api.example.com/v2/tenant/1" {
		t.Fatalf("UpstreamBase = %v, %v", u, err)
	}
}

func TestTransport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var seen http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://evil.invalid/steal", http.StatusFound)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer up.Close()
	v := newTestVault(t)
	c := httpConn("up")
	c.BaseURL = up.URL
	if _, err := v.Create(ctx, c, map[string]string{"token": "s3cret-value"}); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: v.Transport("up", nil)}

	req, _ := http.NewRequest("GET", up.URL+"/user", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen.Get("Authorization") != "Bearer s3cret-value" {
		t.Fatalf("upstream saw Authorization %q", seen.Get("Authorization"))
	}
	if req.Header.Get("Authorization") != "" || resp.Request.Header.Get("Authorization") != "" {
		t.Fatal("caller's request was modified or returned with the credential")
	}

	t.Run("other_host_gets_no_credential", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "http://evil.invalid/", nil)
		if _, err := client.Do(req); !errors.Is(err, ErrCredentialDestination) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("redirect_to_other_host_gets_no_credential", func(t *testing.T) {
		_, err := client.Get(up.URL + "/redirect")
		if !errors.Is(err, ErrCredentialDestination) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unknown_connection", func(t *testing.T) {
		_, err := (&http.Client{Transport: v.Transport("nope", nil)}).Get(up.URL)
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestTransportErrorHidesQuerySecret sends a query_param credential to a
// closed port: the error, which the transport returns as a *url.Error,
// must not contain the secret in any encoding.
func TestTransportErrorHidesQuerySecret(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	secret := "qs-secret/with+chars&more"
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		_, err := http.DefaultTransport.RoundTrip(r)
		return nil, &urlErrorCarrier{url: r.URL.String(), err: err}
	})
	v := newTestVault(t)
	c := &Connection{ID: "q", BaseURL: "http://" + addr, AuthMode: AuthQueryParam, AuthSecretKey: "k"}
	if _, err := v.Create(context.Background(), c, map[string]string{"k": secret}); err != nil {
		t.Fatal(err)
	}
	for name, rt := range map[string]http.RoundTripper{"default_transport": v.Transport("q", nil), "transport_echoing_url": v.Transport("q", base)} {
		t.Run(name, func(t *testing.T) {
			_, err := (&http.Client{Transport: rt}).Get("http://" + addr + "/x?a=1")
			if err == nil {
				t.Fatal("expected an error")
			}
			assertNoSecret(t, err.Error(), secret)
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// urlErrorCarrier mimics a transport whose error text repeats the URL.
type urlErrorCarrier struct {
	url string
	err error
}

func (e *urlErrorCarrier) Error() string { return "GET " + e.url + ": " + e.err.Error() }

func assertNoSecret(t *testing.T, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		for _, form := range encodings(s) {
			if strings.Contains(text, form) {
				t.Fatalf("secret %q (as %q) leaked in: %s", s, form, text)
			}
		}
	}
}

func encodings(s string) []string {
	return []string{s, strings.NewReplacer("/", "%2F", "+", "%2B", "&", "%26").Replace(s)}
}

func TestVaultTestProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != "pk-secret" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer up.Close()
	v := newTestVault(t)
	c := &Connection{ID: "p", BaseURL: up.URL, PathPrefix: "/api", AuthMode: AuthHeaderKey, AuthSecretKey: "k"}
	v.Create(ctx, c, map[string]string{"k": "pk-secret"})
	res, err := v.Test(ctx, "p", TestRequest{Path: "/ping?x=1"}, nil)
	if err != nil || !res.OK || res.Status != 200 {
		t.Fatalf("probe = %+v, %v", res, err)
	}
	stored, _ := v.Connection("p")
	if stored.LastTest == nil || !stored.LastTest.OK {
		t.Fatalf("last_test not recorded: %+v", stored.LastTest)
	}
	// The agent-supplied header cannot replace the credential.
	res, _ = v.Test(ctx, "p", TestRequest{Header: http.Header{"X-Api-Key": {"forged"}}}, nil)
	if !res.OK {
		t.Fatalf("extra header replaced the credential: %+v", res)
	}
	for _, p := range []string{"//evil.example/x", "/../etc", "http://evil.example/", "relative"} {
		if _, err := v.Test(ctx, "p", TestRequest{Path: p}, nil); !isValidation(err) {
			t.Errorf("path %q: err = %v", p, err)
		}
	}
	up.Close()
	res, err = v.Test(ctx, "p", TestRequest{}, nil)
	if err != nil || res.OK || res.Error == "" || strings.Contains(res.Error, up.URL) {
		t.Fatalf("probe of closed upstream = %+v, %v", res, err)
	}
}
