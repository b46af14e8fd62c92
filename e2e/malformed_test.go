package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/testlog"
)

// rawRequest is one request as bytes on the wire, so that it can be
// anything a client can send, not only what net/http would write.
type rawRequest struct {
	kind   string
	method string
	target string // set for the invalid-path rows
	head   []byte
	body   io.Reader // nil: none
}

// rawClient sends rawRequests over one keep-alive connection, redialling
// when the server closes it.
type rawClient struct {
	addr string
	c    net.Conn
	br   *bufio.Reader
}

func (rc *rawClient) close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c = nil
	}
}

// send writes req (the body concurrently, as the server may answer before
// reading it) and reads the answer.
func (rc *rawClient) send(req rawRequest) (answer, error) {
	if rc.c == nil {
		c, err := net.DialTimeout("tcp", rc.addr, 5*time.Second)
		if err != nil {
			return answer{}, err
		}
		rc.c, rc.br = c, bufio.NewReader(c)
	}
	_ = rc.c.SetDeadline(time.Now().Add(10 * time.Second))
	wrote := make(chan error, 1)
	go func(c net.Conn) {
		_, err := c.Write(req.head)
		if err == nil && req.body != nil {
			_, err = io.Copy(c, req.body)
		}
		wrote <- err
	}(rc.c)
	res, err := http.ReadResponse(rc.br, &http.Request{Method: req.method})
	if err != nil {
		rc.close()
		<-wrote
		return answer{}, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if werr := <-wrote; err != nil || werr != nil || res.Close {
		rc.close()
	}
	if err != nil {
		return answer{}, err
	}
	return answer{status: res.StatusCode, header: res.Header, body: body}, nil
}

// header is one header line in wire order.
type header struct{ name, value string }

// signedHeaders signs method url (with body) as id and returns the headers
// Sign set, in a stable order. It may run on any goroutine: a failure is
// reported with t.Error and gives no headers.
func signedHeaders(t testing.TB, id *identity.Identity, method, url string, body []byte, o identity.SignOptions) []header {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err == nil {
		err = id.Sign(req, o)
	}
	if err != nil {
		t.Error(err)
		return nil
	}
	var hs []header
	for name, vs := range req.Header {
		for _, v := range vs {
			hs = append(hs, header{name, v})
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].name < hs[j].name })
	return hs
}

// head writes a request head. contentLength < 0 means chunked; 0 with no
// body writes no length at all.
func head(method, target, host string, hs []header, contentLength int64) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, host)
	for _, h := range hs {
		fmt.Fprintf(&b, "%s: %s\r\n", h.name, h.value)
	}
	switch {
	case contentLength < 0:
		b.WriteString("Transfer-Encoding: chunked\r\n")
	case contentLength > 0:
		fmt.Fprintf(&b, "Content-Length: %d\r\n", contentLength)
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// chunked frames body as one chunk and the terminating chunk.
func chunked(body []byte) io.Reader {
	return io.MultiReader(strings.NewReader(strconv.FormatInt(int64(len(body)), 16)+"\r\n"), bytes.NewReader(body),
		strings.NewReader("\r\n0\r\n\r\n"))
}

// storm generates the malformed requests deterministically from its seed.
type storm struct {
	t          testing.TB
	rng        *rand.Rand
	host, base string
	maxBody    int
	approved   *identity.Identity
	unapproved []*identity.Identity
	template   []header // one signature of the approved agent; mutated copies share its nonce
	// longKeyCert is the approved agent's certificate with a 33-byte public
	// key: 44 base64 characters, the length of a 32-byte key's form.
	longKeyCert string
	filler      []byte // body bytes
}

const tokenChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_!#$%&'*+.^`|~"

func (s *storm) str(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[s.rng.Intn(len(alphabet))]
	}
	return string(b)
}

// junk is random bytes that are legal in a header value (visible ASCII,
// space, tab and obs-text).
func (s *storm) junk(n int) string {
	b := make([]byte, n)
	for i := range b {
		switch c := byte(s.rng.Intn(256)); {
		case c == 0x7f || (c < 0x20 && c != '\t'):
			b[i] = '~'
		default:
			b[i] = c
		}
	}
	return string(b)
}

func (s *storm) route() string {
	switch s.rng.Intn(5) {
	case 0:
		return "/proxy/nope-" + s.str("abc123", 6) + "/x"
	case 1:
		return "/mcp/github"
	case 2:
		return "/" + s.str("abcdefgh", 1+s.rng.Intn(12))
	}
	p := "/proxy/github"
	for range s.rng.Intn(6) {
		p += "/" + s.str("abcdefgh", 1+s.rng.Intn(8))
	}
	return p
}

// mutate garbles v: truncation, byte flips, inserted junk, or bad base64.
func (s *storm) mutate(v string) string {
	if v == "" {
		return s.junk(8)
	}
	switch s.rng.Intn(6) {
	case 0:
		return v[:s.rng.Intn(len(v))]
	case 1:
		b := []byte(v)
		for range 1 + s.rng.Intn(4) {
			b[s.rng.Intn(len(b))] = "!*@$%^&()=:;,\"?<>[]{}"[s.rng.Intn(21)]
		}
		return string(b)
	case 2:
		i := s.rng.Intn(len(v))
		return v[:i] + s.junk(1+s.rng.Intn(16)) + v[i:]
	case 3:
		return strings.Repeat(v, 2+s.rng.Intn(3))
	case 4:
		return ":" + s.str("ABCDEFabcdef0123456789+/=-_", s.rng.Intn(200)) + ":"
	}
	return s.junk(s.rng.Intn(300))
}

// garble returns the template with header name's value mutated.
func (s *storm) garble(name string) []header {
	hs := append([]header(nil), s.template...)
	for i := range hs {
		if strings.EqualFold(hs[i].name, name) {
			hs[i].value = s.mutate(hs[i].value)
		}
	}
	return hs
}

func (s *storm) plain(kind, method, target string, hs []header) rawRequest {
	return rawRequest{kind: kind, method: method, head: head(method, target, s.host, hs, 0)}
}

// next builds malformed request number i.
func (s *storm) next(i int) rawRequest {
	const signedPath = "/proxy/github/repos"
	switch i % 14 {
	case 0: // random header names and values
		var hs []header
		for range 1 + s.rng.Intn(40) {
			hs = append(hs, header{s.str(tokenChars, 1+s.rng.Intn(30)), s.junk(s.rng.Intn(200))})
		}
		return s.plain("random headers", "GET", s.route(), hs)
	case 1: // one huge header, from below to far above MaxHeaderBytes (64 KiB)
		n := 1<<10 + s.rng.Intn(8<<10) // under the limit
		if s.rng.Intn(2) == 0 {
			n = 68<<10 + s.rng.Intn(64<<10) // over MaxHeaderBytes and net/http's 4 KiB slack
		}
		return s.plain("huge header", "GET", s.route(), []header{{"X-Big", strings.Repeat(s.str(tokenChars, 64), n/64)}})
	case 2: // very many headers
		hs := make([]header, 50+s.rng.Intn(3000))
		for j := range hs {
			hs[j] = header{"X-H" + strconv.Itoa(j), s.str(tokenChars, 8)}
		}
		return s.plain("many headers", "GET", s.route(), hs)
	case 3:
		return s.plain("bad Signature-Input", "GET", signedPath, s.garble("Signature-Input"))
	case 4:
		return s.plain("bad Signature", "GET", signedPath, s.garble("Signature"))
	case 5:
		return s.plain("bad base64 cert", "GET", signedPath, s.garble(identity.HeaderAgentCert))
	case 6:
		switch s.rng.Intn(3) {
		case 0:
			return s.plain("bad key or namespace", "GET", signedPath, s.garble(identity.HeaderAgentKey))
		case 1:
			return s.plain("bad key or namespace", "GET", signedPath, s.garble(identity.HeaderNamespace))
		}
		hs := append([]header(nil), s.template...)
		for i := range hs {
			if strings.EqualFold(hs[i].name, identity.HeaderAgentCert) {
				hs[i].value = s.longKeyCert
			}
		}
		return s.plain("cert with a 33-byte key", "GET", signedPath, hs)
	case 7: // declared body over the limit; sent in full only when the server would drain it
		n := int64(s.maxBody) + 1 + s.rng.Int63n(1<<40)
		send := min(n, int64(s.maxBody))
		if s.rng.Intn(2) == 0 {
			n = int64(s.maxBody) + 1 + s.rng.Int63n(int64(s.maxBody))
			send = n
		}
		return rawRequest{kind: "giant body (length)", method: "POST", head: head("POST", s.route(), s.host, nil, n),
			body: io.LimitReader(bytes.NewReader(s.filler), send)}
	case 8: // chunked body over the limit, unsigned
		b := s.filler[:s.maxBody+1+s.rng.Intn(len(s.filler)-s.maxBody-1)]
		return rawRequest{kind: "giant body (chunked)", method: "PUT", head: head("PUT", s.route(), s.host, nil, -1), body: chunked(b)}
	case 9: // approved agent, valid signature over a body over the limit
		b := s.filler[:s.maxBody+1+s.rng.Intn(len(s.filler)-s.maxBody-1)]
		hs := signedHeaders(s.t, s.approved, "POST", s.base+signedPath, b, identity.SignOptions{})
		// Declared lengths only: a declared length over the limit is
		// refused from the header, before the nonce is recorded. A chunked
		// body over the limit from this approved agent is refused too, but
		// only once it is read, after its nonce (so a replay never costs a
		// body read); proxy's TestBodyCheckedAfterAdmission covers it.
		return rawRequest{kind: "giant signed body", method: "POST", head: head("POST", signedPath, s.host, hs, int64(len(b))), body: bytes.NewReader(b)}
	case 10: // methods that are not tokens (Go's server refuses them) and odd tokens
		methods := []string{"G@T", "GET(", "P{T}", "GE\"T", "DE/LETE", "[]", "FOO", "get", "PROPFIND", "CONNECT", "TRACE", s.str(tokenChars, 1+s.rng.Intn(64))}
		m := methods[s.rng.Intn(len(methods))]
		return s.plain("invalid method", m, s.route(), nil)
	case 11: // request targets that are malformed or climb out of the route
		targets := []string{"*", "nopath", "/proxy/github/%zz", "/proxy/%00/x", "/proxy/github/..%2f..%2fapi%2fadmin",
			"/proxy/github/%2e%2e/%2e%2e/metrics", "/proxy/github/a\x01b", "http://evil.example/proxy/github/x",
			"/proxy/github/" + strings.Repeat("a/", 4000), "/proxy/github/x?" + s.junk(50), "/proxy/" + s.str("%!$&'()*+,;=@", 12) + "/x",
			"/proxy/github/a/../b", "/proxy/github//x", "//proxy/github/x", "/api/admin/../proxy/github/x"}
		target := targets[s.rng.Intn(len(targets))]
		r := s.plain("invalid path", "GET", target, nil)
		r.target = target
		return r
	case 12: // duplicated headers: signature fields, identity headers, framing
		hs := append([]header(nil), s.template...)
		switch s.rng.Intn(4) {
		case 0:
			hs = append(hs, header{"Signature", s.template[s.rng.Intn(len(s.template))].value})
		case 1:
			hs = append(hs, header{"Signature-Input", "sig2=();created=1"}, header{"signature-input", "sig1=(\"@method\")"})
		case 2:
			hs = append(hs, header{identity.HeaderNamespace, "other"}, header{identity.HeaderAgentCert, "e30"})
		default:
			hs = append(hs, header{"Content-Length", "5"}, header{"Content-Length", "7"}, header{"Host", "evil.example"})
		}
		return s.plain("duplicate headers", "GET", signedPath, hs)
	}
	// valid signatures the gateway must still refuse before recording the nonce
	switch s.rng.Intn(3) {
	case 0:
		id := s.unapproved[s.rng.Intn(len(s.unapproved))]
		return s.plain("signed, unapproved", "GET", signedPath, signedHeaders(s.t, id, "GET", s.base+signedPath, nil, identity.SignOptions{}))
	case 1:
		p := "/proxy/nope-" + s.str("abc", 5) + "/x"
		return s.plain("signed, no such connection", "GET", p, signedHeaders(s.t, s.approved, "GET", s.base+p, nil, identity.SignOptions{}))
	}
	old := identity.SignOptions{Created: time.Now().Add(-time.Duration(301+s.rng.Intn(1e5)) * time.Second)}
	return s.plain("signed, expired", "GET", signedPath, signedHeaders(s.t, s.approved, "GET", s.base+signedPath, nil, old))
}

// goServerAnswer reports whether a is one of net/http's own refusals of a
// request it could not parse: 400 or 431, plain text, connection closed.
func goServerAnswer(a answer) bool {
	return (a.status == 400 || a.status == 431) && strings.HasPrefix(string(a.body), strconv.Itoa(a.status)+" ") &&
		strings.HasPrefix(a.header.Get("Content-Type"), "text/plain")
}

// muxAnswer reports whether a is net/http's own answer to the target "*":
// 400 with no body (see TestMalformedRequests). Paths with empty or dot
// segments reach the gateway's pipeline, which answers with an envelope.
func muxAnswer(req rawRequest, a answer) (string, bool) {
	if req.target == "*" && a.status == 400 && len(a.body) == 0 {
		return "400 (net/http, target *)", true
	}
	return "", false
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestMalformedRequests sends 10,000 malformed requests, generated from a
// fixed seed, to a gateway with a 16 KiB body limit and room for 4 nonces
// (a nonce store of one 64-byte bucket, whose room is exact).
// Every answer must be a 4xx: the JSON envelope with a code, or net/http's
// own plain 400/431 for a request it cannot parse or whose headers exceed
// MaxHeaderBytes. No connection may close without an answer (a handler
// panic), the heap must come back to where it was, and afterwards the nonce
// store must still hold exactly its 5 free places: none of the refused
// requests, validly signed or not, recorded a nonce.
func TestMalformedRequests(t *testing.T) {
	const (
		total     = 10_000
		workers   = 4
		maxBody   = 16 << 10
		nonceRoom = 5 // one bucket of the store: its 64 bytes
		heapBound = 16 << 20
	)
	w := newWorld(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		io.WriteString(rw, "ok")
	}))
	defer upstream.Close()
	gw := startGateway(t, w, func(c *gateway.Config) {
		c.Proxy.MaxBodyBytes, c.Nonces.MaxBytes, c.ClaimSubmissions.RatePerMinute = maxBody, 64, 1
	}, bearer("github", upstream.URL, "upstream-token"))
	client := &http.Client{Timeout: 10 * time.Second}
	ready, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := gw.gw.Up(ready); err != nil {
		t.Fatal(err)
	}

	host := strings.TrimPrefix(gw.url, "http://")
	seed := int64(20261122)
	newStorm := func(worker int) *storm {
		s := &storm{t: t, rng: rand.New(rand.NewSource(seed + int64(worker))), host: host, base: gw.url, maxBody: maxBody,
			approved: w.agent, filler: bytes.Repeat([]byte("0123456789abcdef"), 4*maxBody/16)}
		for i := range 3 {
			id, err := identity.New(fmt.Sprintf("mallory%d", i))
			if err != nil {
				t.Fatal(err)
			}
			s.unapproved = append(s.unapproved, id)
		}
		s.template = signedHeaders(t, w.agent, "GET", gw.url+"/proxy/github/repos", nil, identity.SignOptions{})
		cert, err := identity.DecodeCertificateHeader(w.agent.CertificateHeader())
		if err != nil {
			t.Fatal(err)
		}
		cert.PublicKey = identity.FormatPublicKey(bytes.Repeat([]byte{7}, 33))
		if s.longKeyCert, err = cert.EncodeHeader(); err != nil {
			t.Fatal(err)
		}
		return s
	}

	// The standard logger is where net/http reports handler panics.
	// Later tests of the package log through it too (a library's
	// package-level slog calls end there), so it is put back at the end.
	var logs testlog.Buffer
	prev := log.Writer()
	log.SetOutput(&logs)
	defer log.SetOutput(io.Discard)
	t.Cleanup(func() { log.SetOutput(prev) })

	before := heapInuse()
	var peak atomic.Uint64
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
			}
		}
	}()

	type outcome struct{ kind, result string }
	var (
		mu       sync.Mutex
		counts   = map[outcome]int{}
		failures []string
		accepted int
	)
	start := time.Now()
	var wg sync.WaitGroup
	storms := make([]*storm, workers)
	for k := range storms {
		storms[k] = newStorm(k)
	}
	for k, s := range storms {
		wg.Go(func() {
			rc := &rawClient{addr: host}
			defer rc.close()
			for i := k; i < total; i += workers {
				req := s.next(i)
				a, err := rc.send(req)
				var result, problem string
				mux, isMux := muxAnswer(req, a)
				switch e, eerr := a.envelope(); {
				case err != nil:
					problem = "no answer (connection closed: panic?): " + err.Error()
				case a.status >= 200 && a.status < 300 && req.kind == "bad Signature-Input":
					result = "2xx accepted" // a mutation the parser reads as the same signature
				case isMux:
					result = mux
				case eerr == nil && a.status >= 400 && a.status < 500:
					result = strconv.Itoa(a.status) + " " + e.Code
				case goServerAnswer(a):
					result = strconv.Itoa(a.status) + " (net/http)"
				default:
					problem = fmt.Sprintf("answer %d %q", a.status, a.body)
				}
				mu.Lock()
				if problem != "" {
					if len(failures) < 20 {
						failures = append(failures, fmt.Sprintf("#%d %s: %s", i, req.kind, problem))
					}
					result = "FAILED"
				}
				if result == "2xx accepted" {
					accepted++
				}
				counts[outcome{req.kind, result}]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopSampling)
	<-sampled
	after := heapInuse()

	keys := make([]outcome, 0, len(counts))
	n := 0
	for o, c := range counts {
		keys = append(keys, o)
		n += c
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].kind < keys[j].kind || keys[i].kind == keys[j].kind && keys[i].result < keys[j].result
	})
	var table strings.Builder
	for _, o := range keys {
		fmt.Fprintf(&table, "\n  %-28s %-40s %5d", o.kind, o.result, counts[o])
	}
	t.Logf("%d malformed requests in %v:%s", n, elapsed.Round(time.Millisecond), table.String())
	t.Logf("HeapInuse (after GC): before %.1f MiB, after %.1f MiB, peak sampled during the storm %.1f MiB",
		mib(before), mib(after), mib(peak.Load()))
	if n != total {
		t.Errorf("%d requests answered, want %d", n, total)
	}
	for _, f := range failures {
		t.Error(f)
	}
	if strings.Contains(logs.String(), "panic") {
		t.Errorf("a handler panicked:\n%s", logs.String())
	}
	if after > before+heapBound {
		t.Errorf("heap grew from %.1f to %.1f MiB, bound %.1f MiB", mib(before), mib(after), mib(before+heapBound))
	}

	if accepted > 1 {
		t.Errorf("%d mutated copies of one signature were accepted; they share a nonce, so at most one may pass", accepted)
	}
	// The nonce store: every accepted storm request took one place; the
	// rest must all be free.
	for i := range nonceRoom - accepted {
		if a := call(t, client, "GET", gw.url+"/proxy/github/repos", w.agent, nil); a.status != 200 {
			t.Fatalf("good request %d after the storm: %d %s (the storm filled the nonce store)", i+1, a.status, a.body)
		}
	}
	call(t, client, "GET", gw.url+"/proxy/github/repos", w.agent, nil).want(t, http.StatusServiceUnavailable, "NONCE_STORE_FULL")
	t.Logf("nonce store: %d of %d places taken by the storm (%d accepted); %d good requests filled the rest, the next got 503 NONCE_STORE_FULL",
		accepted, nonceRoom, accepted, nonceRoom-accepted)
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
