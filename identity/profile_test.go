package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/replay"
)

type profileVectors struct {
	Record        map[string]any `json:"identity_record"`
	CanonicalText string         `json:"certificate_canonical_text"`
	Named         struct {
		Name              string       `json:"name"`
		CanonicalText     string       `json:"canonical_text"`
		Certificate       *Certificate `json:"certificate"`
		CertificateHeader string       `json:"certificate_header"`
	} `json:"named_identity"`
	Names struct {
		Valid   []string `json:"valid"`
		Invalid []struct {
			Name string `json:"name"`
			Why  string `json:"why"`
		} `json:"invalid"`
	} `json:"names"`
	Vectors []struct {
		Name          string            `json:"name"`
		AgentName     string            `json:"agent_name"`
		Method        string            `json:"method"`
		URL           string            `json:"url"`
		Body          string            `json:"body"`
		Subject       string            `json:"subject"`
		Created       int64             `json:"created"`
		Nonce         string            `json:"nonce"`
		SignatureBase string            `json:"signature_base"`
		Headers       map[string]string `json:"headers"`
		// RequestHeaders are on the request before it is signed.
		RequestHeaders map[string]string `json:"request_headers"`
	} `json:"vectors"`
	Negative []struct {
		Name   string `json:"name"`
		Source string `json:"source"`
		Change struct {
			Method string   `json:"method"`
			Header []string `json:"header"`
			Body   *string  `json:"body"`
			URL    string   `json:"url"`
			Now    int64    `json:"now"`
		} `json:"change"`
		Expect string `json:"expect"`
	} `json:"negative"`
}

func loadVectors(tb testing.TB) *profileVectors {
	tb.Helper()
	b, err := os.ReadFile("testdata/idn-profile-v1.json")
	if err != nil {
		tb.Fatal(err)
	}
	var v profileVectors
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatal(err)
	}
	return &v
}

func vectorIdentity(tb testing.TB, v *profileVectors) *Identity {
	return namedVectorIdentity(tb, v, "")
}

// namedVectorIdentity is the vectors' identity with the display name name
// ("" for none).
func namedVectorIdentity(tb testing.TB, v *profileVectors, name string) *Identity {
	tb.Helper()
	seed, err := base64.StdEncoding.DecodeString(v.Record["privateKey"].(string))
	if err != nil {
		tb.Fatal(err)
	}
	issued, _ := time.Parse(time.RFC3339, v.Record["createdAt"].(string))
	id, err := FromKeyNamed(v.Record["namespace"].(string), name, ed25519.NewKeyFromSeed(seed), issued)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

// serverRequest turns a signed client request into what a server would
// receive: origin-form request-target, Host from the URL, same headers.
func serverRequest(tb testing.TB, r *http.Request) *http.Request {
	tb.Helper()
	var body []byte
	if r.GetBody != nil {
		rc, _ := r.GetBody()
		body, _ = io.ReadAll(rc)
	}
	s := httptest.NewRequest(r.Method, r.URL.RequestURI(), bytes.NewReader(body))
	s.Host = r.URL.Host
	if r.Host != "" {
		s.Host = r.Host
	}
	if r.URL.Scheme == "https" {
		s.TLS = r.TLS
		if s.TLS == nil {
			s.TLS = &tlsStateForTests
		}
	}
	s.Header = r.Header.Clone()
	return s
}

func fixedClock(unix int64) func() time.Time {
	return func() time.Time { return time.Unix(unix, 0) }
}

// nonces returns a replay store on the given clock (nil: time.Now).
func nonces(clock func() time.Time) *replay.Store {
	s, err := replay.New(replay.Config{Clock: clock})
	if err != nil {
		panic(err)
	}
	return s
}

func TestProfileVectors(t *testing.T) {
	v := loadVectors(t)
	for _, vec := range v.Vectors {
		t.Run(vec.Name, func(t *testing.T) {
			id := namedVectorIdentity(t, v, vec.AgentName)
			var body io.Reader
			if vec.Body != "" {
				body = strings.NewReader(vec.Body)
			}
			r, err := http.NewRequest(vec.Method, vec.URL, body)
			if err != nil {
				t.Fatal(err)
			}
			for name, val := range vec.RequestHeaders {
				r.Header.Set(name, val)
			}
			err = id.Sign(r, SignOptions{Subject: vec.Subject, Nonce: vec.Nonce, Created: time.Unix(vec.Created, 0)})
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range vec.Headers {
				if got := r.Header.Get(name); got != want {
					t.Errorf("%s\n got %s\nwant %s", name, got, want)
				}
			}
			// The vector's own headers verify.
			vr := serverRequest(t, r)
			for name, val := range vec.Headers {
				vr.Header.Set(name, val)
			}
			ver := &Verifier{Clock: fixedClock(vec.Created), Nonces: nonces(nil)}
			c, err := ver.Verify(vr)
			if err != nil {
				t.Fatalf("Verify: %v (%s)", err, authCode(err))
			}
			if c.Namespace != "vector-alice" || c.Subject != vec.Subject || c.Nonce != vec.Nonce || c.KeyID != id.KeyID() || c.Name != vec.AgentName {
				t.Errorf("caller = %+v", c)
			}
		})
	}
}

// The certificate proofs of the vectors are exact: the canonical text and
// the Ed25519 signature over it, without and with a display name, and the
// named certificate's header byte for byte.
func TestCertificateVectors(t *testing.T) {
	v := loadVectors(t)
	plain := vectorIdentity(t, v)
	if got := plain.Certificate.CanonicalText(); got != v.CanonicalText {
		t.Errorf("canonical text\n got %q\nwant %q", got, v.CanonicalText)
	}
	wantSig := v.Record["certificate"].(map[string]any)["proof"].(map[string]any)["sig"]
	if plain.Certificate.Proof.Sig != wantSig {
		t.Errorf("proof %s, want %s", plain.Certificate.Proof.Sig, wantSig)
	}
	named := namedVectorIdentity(t, v, v.Named.Name)
	if got := named.Certificate.CanonicalText(); got != v.Named.CanonicalText {
		t.Errorf("named canonical text\n got %q\nwant %q", got, v.Named.CanonicalText)
	}
	if named.Certificate.Proof != v.Named.Certificate.Proof {
		t.Errorf("named proof %+v, want %+v", named.Certificate.Proof, v.Named.Certificate.Proof)
	}
	if named.CertificateHeader() != v.Named.CertificateHeader {
		t.Errorf("named header\n got %s\nwant %s", named.CertificateHeader(), v.Named.CertificateHeader)
	}
	if _, err := v.Named.Certificate.VerifyProof(); err != nil {
		t.Errorf("named certificate: %v", err)
	}
	if named.Name() != v.Named.Name || plain.Name() != "" {
		t.Errorf("Name() = %q and %q", named.Name(), plain.Name())
	}
}

func TestNameVectors(t *testing.T) {
	v := loadVectors(t)
	seed, _ := base64.StdEncoding.DecodeString(v.Record["privateKey"].(string))
	for _, name := range v.Names.Valid {
		if err := ValidName(name); err != nil {
			t.Errorf("ValidName(%q) = %v", name, err)
		}
		id, err := FromKeyNamed("vector-alice", name, ed25519.NewKeyFromSeed(seed), time.Unix(0, 0))
		if err != nil {
			t.Fatalf("FromKeyNamed(%q): %v", name, err)
		}
		back, err := DecodeCertificateHeader(id.CertificateHeader())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := back.VerifyProof(); err != nil || back.Name != name {
			t.Errorf("name %q: decoded %q, proof %v", name, back.Name, err)
		}
	}
	for _, bad := range v.Names.Invalid {
		if err := ValidName(bad.Name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidName(%q) (%s) = %v, want ErrInvalidName", bad.Name, bad.Why, err)
		}
		if bad.Name == "" {
			continue // "" means no name when issuing
		}
		if _, err := FromKeyNamed("vector-alice", bad.Name, ed25519.NewKeyFromSeed(seed), time.Unix(0, 0)); !errors.Is(err, ErrInvalidName) {
			t.Errorf("FromKeyNamed(%q) = %v, want ErrInvalidName", bad.Name, err)
		}
		// A certificate that carries such a name with a valid proof is
		// still refused: the rule holds for verifiers, not just issuers.
		c := *v.Named.Certificate
		c.Name = bad.Name
		sig := ed25519.Sign(ed25519.NewKeyFromSeed(seed), []byte(c.CanonicalText()))
		c.Proof.Sig = base64.RawURLEncoding.EncodeToString(sig)
		if _, err := c.VerifyProof(); !errors.Is(err, ErrInvalidCertificate) {
			t.Errorf("VerifyProof with name %q = %v, want ErrInvalidCertificate", bad.Name, err)
		}
	}
}

func TestProfileNegativeVectors(t *testing.T) {
	v := loadVectors(t)
	for _, neg := range v.Negative {
		t.Run(neg.Name, func(t *testing.T) {
			var src = v.Vectors[0]
			for _, vec := range v.Vectors {
				if vec.Name == neg.Source {
					src = vec
				}
			}
			method, url, body, now := src.Method, src.URL, src.Body, src.Created
			if neg.Change.Method != "" {
				method = neg.Change.Method
			}
			if neg.Change.URL != "" {
				url = neg.Change.URL
			}
			if neg.Change.Body != nil {
				body = *neg.Change.Body
			}
			if neg.Change.Now != 0 {
				now = neg.Change.Now
			}
			r, _ := http.NewRequest(method, url, strings.NewReader(body))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
			sr := serverRequest(t, r)
			for name, val := range src.RequestHeaders {
				sr.Header.Set(name, val)
			}
			for name, val := range src.Headers {
				sr.Header.Set(name, val)
			}
			if h := neg.Change.Header; len(h) == 2 {
				sr.Header.Set(h[0], h[1])
			}
			_, err := (&Verifier{Clock: fixedClock(now), Nonces: nonces(nil)}).Verify(sr)
			code := authCode(err)
			if code == "" || !strings.Contains(neg.Expect, code) {
				t.Errorf("Verify = %v (code %q), want %s", err, code, neg.Expect)
			}
		})
	}
}

var tlsStateForTests = tls.ConnectionState{HandshakeComplete: true}

// signed returns a server-side request signed by id at now.
func signed(t *testing.T, id *Identity, method, url, body string, o SignOptions) *http.Request {
	t.Helper()
	var rb io.Reader
	if body != "" {
		rb = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, url, rb)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer agent-token")
	if err := id.Sign(r, o); err != nil {
		t.Fatal(err)
	}
	return serverRequest(t, r)
}

func TestProfileAttacks(t *testing.T) {
	const now = 1700000000
	alice, _ := FromKey("alice", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)), time.Unix(now-3600, 0))
	bob, _ := FromKey("bobby", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, 32)), time.Unix(now-3600, 0))
	aliceOtherKey, _ := FromKey("alice", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32)), time.Unix(now-3600, 0))
	expiring, _ := IssueCertificate("alice", alice.privateKey, time.Unix(now-3600, 0), time.Unix(now-60, 0))
	expiredHeader, _ := expiring.EncodeHeader()
	at := SignOptions{Created: time.Unix(now, 0)}
	const url = "http://127.0.0.1:38100/proxy/github/user?per_page=5"

	rows := []struct {
		name   string
		req    func(t *testing.T) *http.Request
		now    int64
		expect error
	}{
		{"valid get", func(t *testing.T) *http.Request { return signed(t, alice, "GET", url, "", at) }, now, nil},
		{"valid post", func(t *testing.T) *http.Request { return signed(t, alice, "POST", url, `{"a":1}`, at) }, now, nil},
		{"strict rfc method case", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest("POST", url, nil)
			p, _ := alice.prepareRequest(r, at, false)
			s := &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(alice.privateKey)}
			if err := s.SignRequest(r, p); err != nil {
				t.Fatal(err)
			}
			return serverRequest(t, r)
		}, now, nil},
		{"tampered method", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Method = "DELETE"
			return r
		}, now, httpsig.ErrSignatureInvalid},
		{"tampered path", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.RequestURI = "/proxy/github/admin?per_page=5"
			return r
		}, now, httpsig.ErrSignatureInvalid},
		{"tampered query", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.RequestURI = "/proxy/github/user?per_page=500"
			return r
		}, now, httpsig.ErrSignatureInvalid},
		{"tampered host", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Host = "evil.example:38100"
			return r
		}, now, httpsig.ErrSignatureInvalid},
		{"tampered scheme", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.TLS = &tlsStateForTests
			return r
		}, now, httpsig.ErrSignatureInvalid},
		{"absolute-form target signed for https replayed over plain http", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", "https://evil.example/proxy/github/user?per_page=5", "", at)
			r.TLS = nil
			r.RequestURI = "https://evil.example/proxy/github/user?per_page=5"
			return r
		}, now, httpsig.ErrSignatureInvalid},
		{"tampered subject", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Set(HeaderSubject, "someone-else")
			return r
		}, now, httpsig.ErrSignatureInvalid},
		{"tampered namespace", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Set(HeaderNamespace, "bobby")
			return r
		}, now, httpsig.ErrIdentityInvalid},
		{"tampered agent key", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Set(HeaderAgentKey, bob.PublicKeyString())
			return r
		}, now, httpsig.ErrIdentityInvalid},
		{"tampered cert", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Set(HeaderAgentCert, aliceOtherKey.CertificateHeader())
			return r
		}, now, httpsig.ErrIdentityInvalid},
		{"tampered body", func(t *testing.T) *http.Request {
			r := signed(t, alice, "POST", url, `{"a":1}`, at)
			r.Body = io.NopCloser(strings.NewReader(`{"a":2}`))
			return r
		}, now, httpsig.ErrSignatureInvalid},
		{"body smuggled onto a bodiless signature", func(t *testing.T) *http.Request {
			r := signed(t, alice, "POST", url, "", at)
			r.Body = io.NopCloser(strings.NewReader(`{"a":2}`))
			return r
		}, now, httpsig.ErrComponentsInvalid},
		{"wrong key for certificate", func(t *testing.T) *http.Request {
			// Signed by another key but presenting alice's certificate and key.
			r := signed(t, aliceOtherKey, "GET", url, "", at)
			r.Header.Set(HeaderAgentKey, alice.PublicKeyString())
			r.Header.Set(HeaderAgentCert, alice.CertificateHeader())
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), aliceOtherKey.KeyID(), alice.KeyID(), 1))
			return r
		}, now, httpsig.ErrSignatureInvalid},
		{"certificate for another namespace", func(t *testing.T) *http.Request {
			r := signed(t, bob, "GET", url, "", at)
			r.Header.Set(HeaderNamespace, "alice")
			return r
		}, now, httpsig.ErrIdentityInvalid},
		{"certificate and key mismatch", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Set(HeaderAgentCert, bob.CertificateHeader())
			return r
		}, now, httpsig.ErrIdentityInvalid},
		{"keyid mismatch", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), alice.KeyID(), "did:idn:alice#other", 1))
			return r
		}, now, httpsig.ErrIdentityInvalid},
		{"expired certificate", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest("GET", url, nil)
			p, _ := alice.prepareRequest(r, at, false)
			r.Header.Set(HeaderAgentCert, expiredHeader)
			if err := alice.signer().SignRequest(r, p); err != nil {
				t.Fatal(err)
			}
			return serverRequest(t, r)
		}, now, httpsig.ErrIdentityInvalid},
		{"created too old", func(t *testing.T) *http.Request { return signed(t, alice, "GET", url, "", at) }, now + 301, httpsig.ErrSignatureInvalid},
		{"created in the future", func(t *testing.T) *http.Request { return signed(t, alice, "GET", url, "", at) }, now - 31, httpsig.ErrSignatureInvalid},
		{"missing nonce", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			in := r.Header.Get("Signature-Input")
			r.Header.Set("Signature-Input", in[:strings.Index(in, ";nonce=")])
			return r
		}, now, httpsig.ErrNonceInvalid},
		{"malformed nonce", func(t *testing.T) *http.Request {
			return signed(t, alice, "GET", url, "", SignOptions{Created: time.Unix(now, 0), Nonce: "short"})
		}, now, nil}, // rejected at signing; see TestSignRejectsBadInput
		{"missing identity header", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Del(HeaderSubject)
			return r
		}, now, httpsig.ErrIdentityInvalid},
		{"duplicate identity header", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Add(HeaderNamespace, "alice")
			return r
		}, now, httpsig.ErrHeadersInvalid},
		{"duplicate signature header", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Add("Signature", r.Header.Get("Signature"))
			return r
		}, now, httpsig.ErrHeadersInvalid},
		{"malformed signature-input", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Set("Signature-Input", `sig1=("@method" "@target-uri";created=1`)
			return r
		}, now, httpsig.ErrHeadersInvalid},
		{"malformed signature", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Set("Signature", `sig1=:not base64!:`)
			return r
		}, now, httpsig.ErrHeadersInvalid},
		{"two signatures", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Set("Signature-Input", r.Header.Get("Signature-Input")+", "+strings.Replace(r.Header.Get("Signature-Input"), "sig1=", "sig2=", 1))
			r.Header.Set("Signature", r.Header.Get("Signature")+", "+strings.Replace(r.Header.Get("Signature"), "sig1=", "sig2=", 1))
			return r
		}, now, httpsig.ErrHeadersInvalid},
		{"component dropped", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest("GET", url, nil)
			p, _ := alice.prepareRequest(r, at, false)
			p.Components = p.Components[:5]
			if err := alice.signer().SignRequest(r, p); err != nil {
				t.Fatal(err)
			}
			return serverRequest(t, r)
		}, now, httpsig.ErrComponentsInvalid},
		{"alg downgrade", func(t *testing.T) *http.Request {
			r := signed(t, alice, "GET", url, "", at)
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), `alg="ed25519"`, `alg="hmac-sha256"`, 1))
			return r
		}, now, httpsig.ErrSignatureInvalid},
	}
	for _, row := range rows {
		if row.name == "malformed nonce" {
			continue
		}
		t.Run(row.name, func(t *testing.T) {
			ver := &Verifier{Clock: fixedClock(row.now), Nonces: nonces(nil)}
			c, err := ver.Verify(row.req(t))
			if row.expect == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if c.Namespace != "alice" {
					t.Errorf("namespace = %q", c.Namespace)
				}
				return
			}
			if !errors.Is(err, row.expect) {
				t.Fatalf("Verify = %v (code %s), want %v", err, authCode(err), row.expect)
			}
		})
	}
}

func TestReplayAndNonceScope(t *testing.T) {
	const now = 1700000000
	alice, _ := FromKey("alice", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)), time.Unix(now, 0))
	ver := &Verifier{Clock: fixedClock(now), Nonces: nonces(fixedClock(now))}
	o := SignOptions{Created: time.Unix(now, 0), Nonce: "nonce-0001"}
	if _, err := ver.Verify(signed(t, alice, "GET", "http://gw/x", "", o)); err != nil {
		t.Fatal(err)
	}
	_, err := ver.Verify(signed(t, alice, "GET", "http://gw/x", "", o))
	if authCode(err) != "AUTH_REPLAY_DETECTED" {
		t.Errorf("replay: %v", err)
	}
	if _, err := (&Verifier{Clock: fixedClock(now)}).Verify(signed(t, alice, "GET", "http://gw/x", "", o)); !errors.Is(err, httpsig.ErrNonceInvalid) {
		t.Errorf("nil nonce checker: %v, want rejection", err)
	}
	c, err := (&Verifier{Clock: fixedClock(now), InsecureSkipNonceCheck: true}).Verify(signed(t, alice, "GET", "http://gw/x", "", o))
	if err != nil || c.Nonce != "nonce-0001" || !c.NonceUntil.Equal(time.Unix(now, 0).Add(DefaultMaxAge)) {
		t.Errorf("deferred nonce: %+v, %v", c, err)
	}
}

func TestSignRejectsBadInput(t *testing.T) {
	alice, _ := New("alice")
	for name, o := range map[string]SignOptions{
		"short nonce":       {Nonce: "short"},
		"nonce with quote":  {Nonce: `abcdefgh"`},
		"subject too long":  {Subject: strings.Repeat("s", 257)},
		"subject with CRLF": {Subject: "a\r\nX-Evil: 1"},
		"subject with a right-to-left override shown beside approve": {Subject: "alice\u202Enimda"},
		"subject with a zero-width space":                            {Subject: "ali\u200Bce"},
		"subject not UTF-8":                                          {Subject: "ali\xffce"},
	} {
		r, _ := http.NewRequest("GET", "http://gw/x", nil)
		if err := alice.Sign(r, o); err == nil {
			t.Errorf("%s: Sign accepted bad input", name)
		}
	}
}

func TestTransportAgainstServer(t *testing.T) {
	alice, _ := New("alice")
	ver := &Verifier{Nonces: nonces(nil)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := ver.Verify(r)
		if err != nil {
			http.Error(w, authCode(err), http.StatusForbidden)
			return
		}
		body, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, c.Namespace+"/"+c.Subject+":"+string(body))
	}))
	defer srv.Close()
	client := &http.Client{Transport: alice.Transport(nil, SignOptions{Subject: "user-7"})}
	for _, body := range []string{"", `{"hello":"world"}`} {
		req, _ := http.NewRequest("POST", srv.URL+"/a/b?c=d%2Fe", strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(got) != "alice/user-7:"+body {
			t.Errorf("body %q: %d %s", body, resp.StatusCode, got)
		}
		if req.Header.Get("Signature") != "" || req.Header.Get(HeaderNamespace) != "" {
			t.Errorf("Transport mutated the caller's request")
		}
	}
}

// A spoofed gateway that answers 3xx must not get a request signed for the
// real gateway: the transport refuses to sign the redirected hop.
func TestTransportNeverSignsARedirect(t *testing.T) {
	alice, _ := New("alice")
	ver := &Verifier{Nonces: nonces(nil)}
	var accepted []string
	realGateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := ver.Verify(r); err == nil {
			accepted = append(accepted, r.Method+" "+r.URL.String())
		}
	}))
	defer realGateway.Close()
	client := &http.Client{Transport: alice.Transport(nil, SignOptions{})}
	for _, code := range []int{301, 302, 303, 307, 308} {
		spoofed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, realGateway.URL+"/proxy/bank/transfer?to=mallory", code)
		}))
		resp, err := client.Post(spoofed.URL+"/mcp/docs", "application/json", strings.NewReader(`{"jsonrpc":"2.0"}`))
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, httpsig.ErrRedirectRefused) {
			t.Errorf("spoofed gateway answering %d: %v, want ErrRedirectRefused", code, err)
		}
		spoofed.Close()
	}
	if len(accepted) != 0 {
		t.Errorf("the real gateway accepted redirected requests: %q", accepted)
	}
}

func BenchmarkEd25519SignRaw(b *testing.B) {
	_, key, _ := ed25519.GenerateKey(nil)
	msg := make([]byte, 900)
	b.ReportAllocs()
	for b.Loop() {
		ed25519.Sign(key, msg)
	}
}

func BenchmarkProfileSign(b *testing.B) {
	alice, _ := New("alice")
	r, _ := http.NewRequest("GET", "http://127.0.0.1:38100/proxy/github/user?per_page=5", nil)
	b.ReportAllocs()
	for b.Loop() {
		if err := alice.Sign(r, SignOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEd25519VerifyRaw(b *testing.B) {
	pub, key, _ := ed25519.GenerateKey(nil)
	msg := make([]byte, 900)
	sig := ed25519.Sign(key, msg)
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("verify")
		}
	}
}

// BenchmarkProfileVerifyCached verifies a small signed GET whose
// certificate is already in the verifier's cache: the hot path of a gateway.
func BenchmarkProfileVerifyCached(b *testing.B) {
	alice, _ := New("alice")
	r, _ := http.NewRequest("GET", "http://127.0.0.1:38100/proxy/github/user?per_page=5", nil)
	if err := alice.Sign(r, SignOptions{}); err != nil {
		b.Fatal(err)
	}
	sr := httptest.NewRequest("GET", "/proxy/github/user?per_page=5", nil)
	sr.Host = "127.0.0.1:38100"
	sr.Header = r.Header
	ver := &Verifier{InsecureSkipNonceCheck: true}
	if _, err := ver.Verify(sr); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ver.Verify(sr); err != nil {
			b.Fatal(err)
		}
	}
}

// authCode is the wire name of err's code, "" when it has none.
func authCode(err error) string {
	if code, ok := AuthCode(err); ok {
		return code.String()
	}
	return ""
}

// A POST carrying MCP's routing headers is signed over them too, after
// the profile's components, and verifies; a header changed after signing
// fails, and the headers cannot ride a signature without a body.
func TestSignCoversMCPRoutingHeaders(t *testing.T) {
	v := loadVectors(t)
	id := vectorIdentity(t, v)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a.echo"}}`
	for _, c := range []struct {
		name    string
		headers []string
		covered string
	}{
		{"method and name", []string{"Mcp-Method", "tools/call", "Mcp-Name", "a.echo"}, `"idn-agent-cert" "mcp-method" "mcp-name")`},
		{"method alone", []string{"Mcp-Method", "tools/list"}, `"idn-agent-cert" "mcp-method")`},
		{"name alone is not covered", []string{"Mcp-Name", "a.echo"}, `"idn-agent-cert")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:38100/mcp/github", strings.NewReader(body))
			for i := 0; i < len(c.headers); i += 2 {
				r.Header.Set(c.headers[i], c.headers[i+1])
			}
			if err := id.Sign(r, SignOptions{}); err != nil {
				t.Fatal(err)
			}
			if in := r.Header.Get("Signature-Input"); !strings.Contains(in, c.covered) {
				t.Fatalf("Signature-Input %s, want it to end the components with %s", in, c.covered)
			}
			if _, err := (&Verifier{Nonces: nonces(nil)}).Verify(serverRequest(t, r)); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if len(c.headers) == 4 {
				swapped := serverRequest(t, r)
				swapped.Header.Set("Mcp-Name", "a.admin")
				if _, err := (&Verifier{Nonces: nonces(nil)}).Verify(swapped); err == nil {
					t.Fatal("a tool swapped in the signed Mcp-Name header verified")
				}
			}
		})
	}
	// An attacker cannot pass the routing headers off without a body.
	r, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:38100/mcp/github", nil)
	r.Header.Set("Mcp-Method", "tools/call")
	if err := id.Sign(r, SignOptions{}); err != nil {
		t.Fatal(err)
	}
	if in := r.Header.Get("Signature-Input"); strings.Contains(in, "mcp-method") {
		t.Errorf("a request without a body covers %s", in)
	}
}
