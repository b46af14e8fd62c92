package claimcache_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
)

func collect(t *testing.T, src claimcache.Source, service, version string) ([]claimcache.Claim, string, error) {
	t.Helper()
	var got []claimcache.Claim
	v, err := src.ApprovedClaims(context.Background(), service, version, func(c claimcache.Claim) error {
		got = append(got, c)
		return nil
	})
	return got, v, err
}

func TestHTTPSourceFollowsPaginationAndETag(t *testing.T) {
	t.Parallel()
	cp := newControlPlane(t, fiveClaims()...)
	src := &claimcache.HTTPSource{BaseURL: cp.URL, APIKey: keysOf(cp), PageSize: 2}

	got, etag, err := collect(t, src, "github", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[0].ID != "clm_0" || got[4].ID != "clm_4" || etag == "" {
		t.Fatalf("got %d claims, etag %q", len(got), etag)
	}
	reqs := cp.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d page requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		q := r.URL.Query()
		// The first page at offset 0, the next after the last claim read.
		if q.Get("service") != "github" || q.Get("limit") != "2" || i == 0 && q.Get("offset") != "0" || i > 0 && q.Get("after") != fmt.Sprintf("clm_%d", 2*i-1) {
			t.Errorf("page %d query %q", i, r.URL.RawQuery)
		}
		if r.Header.Get("Authorization") != "Bearer "+cp.APIKey("github") || r.Header.Get("If-None-Match") != "" {
			t.Errorf("page %d headers %v", i, r.Header)
		}
	}

	// Unchanged set: one request for the changes after the cursor.
	if _, _, err := collect(t, src, "github", etag); !errors.Is(err, claimcache.ErrNotModified) {
		t.Fatalf("unchanged feed: %v, want ErrNotModified", err)
	}
	reqs = cp.Requests()
	if len(reqs) != 4 || reqs[3].URL.Query().Get("since") != etag {
		t.Fatalf("request for changes missing: %d requests", len(reqs))
	}

	// Changed set: full read again, If-None-Match only on the first page.
	cp.Approve(newAgent("agent-5").claim("clm_5", "github"))
	got, etag2, err := collect(t, src, "github", etag)
	if err != nil || len(got) != 6 || etag2 == etag {
		t.Fatalf("changed feed: %d claims, etag %q, err %v", len(got), etag2, err)
	}
	for _, r := range cp.Requests()[5:] {
		if r.Header.Get("If-None-Match") != "" {
			t.Errorf("If-None-Match sent on offset %s", r.URL.Query().Get("offset"))
		}
	}
}

// withoutCursor serves cp as a control plane from before change cursors
// does: without "cursor" in its answers. hook, when set, sees each request
// first.
func withoutCursor(t *testing.T, cp *claimcachetest.Server, hook func(*http.Request)) string {
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hook != nil {
			hook(r)
		}
		rec := httptest.NewRecorder()
		cp.ServeHTTP(rec, r)
		maps.Copy(w.Header(), rec.Header())
		var body map[string]any
		if json.Unmarshal(rec.Body.Bytes(), &body) == nil {
			delete(body, "cursor")
			w.WriteHeader(rec.Code)
			json.NewEncoder(w).Encode(body)
			return
		}
		w.WriteHeader(rec.Code)
	}))
	t.Cleanup(front.Close)
	return front.URL
}

// TestHTTPSourcePagesByClaim: a read paged after the last claim read
// skips no claim when an earlier one is revoked meanwhile, where paging by
// offset would skip one.
func TestHTTPSourcePagesByClaim(t *testing.T) {
	t.Parallel()
	cp := newControlPlane(t, fiveClaims()...)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("after") == "clm_1" {
			cp.Revoke("clm_0")
		}
		cp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	src := &claimcache.HTTPSource{BaseURL: front.URL, APIKey: keysOf(cp), PageSize: 2}
	got, _, err := collect(t, src, "github", "")
	if err != nil || len(got) != 5 || got[2].ID != "clm_2" || got[4].ID != "clm_4" {
		t.Fatalf("read %v, %v", got, err)
	}
}

// TestHTTPSourceETagWithoutCursor: a control plane whose pages carry no
// cursor is versioned by ETag, and an unchanged feed costs one 304.
func TestHTTPSourceETagWithoutCursor(t *testing.T) {
	t.Parallel()
	cp := newControlPlane(t, fiveClaims()...)
	src := &claimcache.HTTPSource{BaseURL: withoutCursor(t, cp, nil), APIKey: keysOf(cp), PageSize: 2}
	_, etag, err := collect(t, src, "github", "")
	if err != nil || !strings.HasPrefix(etag, `"`) {
		t.Fatalf("version %q, %v", etag, err)
	}
	if _, _, err := collect(t, src, "github", etag); !errors.Is(err, claimcache.ErrNotModified) {
		t.Fatalf("unchanged feed: %v, want ErrNotModified", err)
	}
	reqs := cp.Requests()
	if len(reqs) != 4 || reqs[3].Header.Get("If-None-Match") != etag {
		t.Fatalf("conditional request missing: %d requests", len(reqs))
	}
	_, err = src.ClaimChanges(t.Context(), "github", etag, func(claimcache.Change) error { return nil })
	if !errors.Is(err, claimcache.ErrVersionExpired) {
		t.Fatalf("changes after an ETag: %v", err)
	}
}

// fiveClaims are approved claims of "github", clm_0 to clm_4: three pages
// of two.
func fiveClaims() []claimcache.Claim {
	var claims []claimcache.Claim
	for i := range 5 {
		claims = append(claims, newAgent(fmt.Sprintf("agent-%d", i)).claim(fmt.Sprintf("clm_%d", i), "github"))
	}
	return claims
}

func TestHTTPSourceErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, cp *claimcachetest.Server, src *claimcache.HTTPSource)
		want    error // matched with errors.Is, when set
		status  int   // StatusError.StatusCode, when set
		code    string
		message string // substring of the error, when set
	}{
		{name: "wrong key is reported without echoing it",
			setup: func(_ *testing.T, _ *claimcachetest.Server, src *claimcache.HTTPSource) {
				src.APIKey = func(string) (string, error) { return "idn_sk_wrong-key", nil }
			},
			status: http.StatusUnauthorized, code: "API_KEY_INVALID"},
		{name: "a control plane that echoes the key in its error is not repeated",
			setup: func(t *testing.T, _ *claimcachetest.Server, src *claimcache.HTTPSource) {
				echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					writeError(w, http.StatusUnauthorized, "API_KEY_INVALID", "bad key "+r.Header.Get("Authorization"))
				}))
				t.Cleanup(echo.Close)
				src.BaseURL = echo.URL
			},
			status: http.StatusUnauthorized, code: "API_KEY_INVALID"},
		{name: "an older control plane's former code name is read as today's",
			setup: func(t *testing.T, _ *claimcachetest.Server, src *claimcache.HTTPSource) {
				old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					writeError(w, http.StatusConflict, "NONCE_REPLAY", "nonce already used")
				}))
				t.Cleanup(old.Close)
				src.BaseURL = old.URL
			},
			status: http.StatusConflict, code: "AUTH_REPLAY_DETECTED"},
		{name: "a code outside the table is not repeated",
			setup: func(t *testing.T, _ *claimcachetest.Server, src *claimcache.HTTPSource) {
				odd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					writeError(w, http.StatusBadRequest, "KEY_IDN_SK_SECRET", "odd")
				}))
				t.Cleanup(odd.Close)
				src.BaseURL = odd.URL
			},
			status: http.StatusBadRequest, code: ""},
		{name: "control plane down",
			setup:  func(_ *testing.T, cp *claimcachetest.Server, _ *claimcache.HTTPSource) { cp.SetUnavailable(true) },
			status: http.StatusServiceUnavailable, code: "DATABASE_UNAVAILABLE"},
		{name: "key callback fails",
			setup: func(_ *testing.T, _ *claimcachetest.Server, src *claimcache.HTTPSource) {
				src.APIKey = func(string) (string, error) { return "", errors.New("no key") }
			},
			message: "no key"},
		{name: "feed paged by offset shrinks while paged (revocation)",
			setup: func(t *testing.T, cp *claimcachetest.Server, src *claimcache.HTTPSource) {
				src.BaseURL = withoutCursor(t, cp, func(r *http.Request) {
					if r.URL.Query().Get("offset") == "2" {
						cp.Revoke("clm_0")
					}
				})
			},
			want: claimcache.ErrFeedChanged},
		{name: "page size out of range",
			setup:   func(_ *testing.T, _ *claimcachetest.Server, src *claimcache.HTTPSource) { src.PageSize = 2001 },
			message: "PageSize"},
		{name: "unreachable control plane",
			setup:   func(_ *testing.T, cp *claimcachetest.Server, _ *claimcache.HTTPSource) { cp.Close() },
			message: "feed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cp := newControlPlane(t, fiveClaims()...)
			src := &claimcache.HTTPSource{BaseURL: cp.URL, APIKey: keysOf(cp), PageSize: 2}
			tt.setup(t, cp, src)
			_, _, err := collect(t, src, "github", "")
			if err == nil {
				t.Fatal("no error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if tt.status != 0 {
				var se *claimcache.StatusError
				if !errors.As(err, &se) || se.StatusCode != tt.status || se.Code != tt.code {
					t.Errorf("err = %#v, want status %d code %s", err, tt.status, tt.code)
				}
			}
			if tt.message != "" && !strings.Contains(err.Error(), tt.message) {
				t.Errorf("err = %v, want it to mention %q", err, tt.message)
			}
			if strings.Contains(err.Error(), "idn_sk_") {
				t.Errorf("error leaks a key: %v", err)
			}
		})
	}
}

func TestHTTPSourceRejectsMalformedPages(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body string }{
		{"not JSON", `<html>`},
		{"missing claims", `{"pagination":{"limit":2,"offset":0,"total":0,"has_more":false}}`},
		{"missing pagination", `{"claims":[]}`},
		{"pagination without has_more", `{"claims":[],"pagination":{"limit":2,"offset":0,"total":0}}`},
		{"more claims than the limit", `{"claims":[{},{},{}],"pagination":{"limit":2,"offset":0,"total":3,"has_more":false}}`},
		{"has_more on an empty page loops forever", `{"claims":[],"pagination":{"limit":2,"offset":0,"total":9,"has_more":true}}`},
		{"trailing garbage", `{"claims":[],"pagination":{"limit":2,"offset":0,"total":0,"has_more":false}} {}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte(tt.body))
			}))
			defer feed.Close()
			src := &claimcache.HTTPSource{BaseURL: feed.URL, APIKey: func(string) (string, error) { return "idn_sk_k", nil }}
			if _, _, err := collect(t, src, "github", ""); err == nil {
				t.Fatal("malformed page accepted")
			}
		})
	}
}
