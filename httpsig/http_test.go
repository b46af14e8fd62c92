package httpsig_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/httpsig"
)

// echoVerified answers with what Middleware verified and the body it saw.
func echoVerified(w http.ResponseWriter, r *http.Request) {
	ver, ok := httpsig.FromContext(r.Context())
	if !ok {
		http.Error(w, "no verification in context", http.StatusInternalServerError)
		return
	}
	body, _ := io.ReadAll(r.Body)
	json.NewEncoder(w).Encode(map[string]any{"label": ver.Label, "keyid": ver.Params.KeyID, "body": string(body)})
}

func TestTransportAndMiddleware(t *testing.T) {
	v := &httpsig.Verifier{
		Keys:   staticKey(httpsig.NewEd25519VerifyingKey(testEdPub)),
		Nonces: &memNonces{},
		Required: []httpsig.Component{
			{Name: "@method"}, {Name: "@target-uri"}, {Name: "content-digest"},
		},
	}
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(echoVerified)))
	defer srv.Close()

	var seenBody []byte
	tr := &httpsig.Transport{
		Base:   srv.Client().Transport,
		Signer: &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv)},
		Params: func(r *http.Request, body []byte) (httpsig.Params, error) {
			seenBody = body
			r.Header.Set("X-Client", "test")
			return httpsig.Params{
				Components: []httpsig.Component{{Name: "@method"}, {Name: "@target-uri"}, {Name: "content-digest"}, {Name: "x-client"}},
				Created:    time.Now(),
				KeyID:      "client-1",
				Nonce:      "n-" + r.URL.Query().Get("n"),
			}, nil
		},
	}
	client := &http.Client{Transport: tr}

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/things?n=1", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	before := req.Header.Clone()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	if got["label"] != "sig1" || got["keyid"] != "client-1" || got["body"] != "hello" {
		t.Fatalf("server saw %v", got)
	}
	if string(seenBody) != "hello" {
		t.Fatalf("Params got body %q", seenBody)
	}
	// The caller's request is untouched: no signature, digest or extra header.
	if len(req.Header) != len(before) || req.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("caller's headers changed: %v", req.Header)
	}
	for _, h := range []string{"Signature", "Signature-Input", "Content-Digest", "X-Client"} {
		if req.Header.Get(h) != "" {
			t.Fatalf("caller's request gained %s", h)
		}
	}

	// Replaying the same nonce is refused, naming only the kind of failure.
	req2, _ := http.NewRequest(http.MethodPost, srv.URL+"/things?n=1", strings.NewReader("hello"))
	resp2, err := client.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := readAnswer(t, resp2); status != http.StatusForbidden || body != httpsig.ErrReplayDetected.Error() {
		t.Fatalf("replay: %d %q", status, body)
	}

	// An unsigned request is refused.
	resp3, err := srv.Client().Get(srv.URL + "/things")
	if err != nil {
		t.Fatal(err)
	}
	if status, body := readAnswer(t, resp3); status != http.StatusForbidden || body != httpsig.ErrHeadersInvalid.Error() {
		t.Fatalf("unsigned: %d %q", status, body)
	}
}

func TestTransportDefaultParams(t *testing.T) {
	v := &httpsig.Verifier{
		Keys:     staticKey(httpsig.NewEd25519VerifyingKey(testEdPub)),
		Nonces:   &memNonces{},
		Required: []httpsig.Component{{Name: "@method"}, {Name: "@target-uri"}},
	}
	var errs []error
	v.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		errs = append(errs, err)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(echoVerified)))
	defer srv.Close()
	client := &http.Client{Transport: &httpsig.Transport{
		Base:   srv.Client().Transport,
		Signer: &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv)},
	}}
	for _, body := range []string{"", "", "non-empty"} { // a fresh nonce each time
		resp, err := client.Post(srv.URL+"/a%2Fb?x=%41", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %v", resp.StatusCode, errs)
		}
	}
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(errs) != 1 {
		t.Fatalf("ErrorHandler not used: %d %v", resp.StatusCode, errs)
	}
}

func TestMiddlewareBodyTooLarge(t *testing.T) {
	v := newVerifier(httpsig.NewEd25519VerifyingKey(testEdPub))
	v.Clock, v.Origin, v.MaxBodyBytes = nil, nil, 4
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(echoVerified)))
	defer srv.Close()
	client := &http.Client{Transport: &httpsig.Transport{
		Base:   srv.Client().Transport,
		Signer: &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv)},
	}}
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("more than four bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if status, body := readAnswer(t, resp); status != http.StatusRequestEntityTooLarge || body != httpsig.ErrBodyTooLarge.Error() {
		t.Fatalf("%d %q", status, body)
	}
}

// readAnswer returns the status and the trimmed body of resp, closing it.
func readAnswer(t *testing.T, resp *http.Response) (int, string) {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// A server that answers 3xx must not obtain a signed request for the URL it
// names: a Transport that signed each hop would hand a hostile or spoofed
// server a request to replay where the signer is trusted.
func TestTransportNeverSignsARedirect(t *testing.T) {
	var replayable []string
	trusted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		replayable = append(replayable, r.Method+" "+r.URL.Path+" "+r.Header.Get("Signature-Input"))
	}))
	defer trusted.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run("hostile server answers "+strconv.Itoa(code), func(t *testing.T) {
			replayable = nil
			hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, trusted.URL+"/v1/transfer?to=attacker", code)
			}))
			defer hostile.Close()
			tr := &httpsig.Transport{Signer: &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv)}}

			// A client that follows redirects gets the refusal.
			resp, err := (&http.Client{Transport: tr}).Post(hostile.URL+"/mcp", "application/json", strings.NewReader(`{"a":1}`))
			if err == nil {
				resp.Body.Close()
			}
			if !errors.Is(err, httpsig.ErrRedirectRefused) {
				t.Errorf("following client: %v, want ErrRedirectRefused", err)
			}
			// A client that keeps the 3xx gets it.
			noFollow := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err = noFollow.Post(hostile.URL+"/mcp", "application/json", strings.NewReader(`{"a":1}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != code {
				t.Errorf("non-following client got %d, want %d", resp.StatusCode, code)
			}
			if len(replayable) != 0 {
				t.Errorf("the redirect target received %q", replayable)
			}
		})
	}
}
