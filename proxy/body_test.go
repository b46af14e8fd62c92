package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/bodybudget"
)

// rawRequest is a request written by hand on its own connection, so a test
// can send the head and only part of the body.
type rawRequest struct {
	conn net.Conn
	br   *bufio.Reader
	body []byte
	sent int
}

// sendHead signs nothing: r carries whatever headers the row gives it. It
// writes the request line, the headers, a Content-Length for body (or
// chunked framing when chunked is set) and the first part bytes of body.
func sendHead(t *testing.T, addr string, r *http.Request, body []byte, part int, chunked bool) *rawRequest {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", r.Method, r.URL.RequestURI(), r.URL.Host)
	for name, vals := range r.Header {
		for _, v := range vals {
			fmt.Fprintf(&b, "%s: %s\r\n", name, v)
		}
	}
	if chunked {
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		fmt.Fprintf(&b, "%x\r\n%s\r\n", part, body[:part])
	} else {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
		b.Write(body[:part])
	}
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	return &rawRequest{conn: c, br: bufio.NewReader(c), body: body, sent: part}
}

// finish sends the rest of the body.
func (rr *rawRequest) finish(t *testing.T, chunked bool) {
	t.Helper()
	rest := rr.body[rr.sent:]
	if chunked {
		var b bytes.Buffer
		if len(rest) > 0 {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(rest), rest)
		}
		b.WriteString("0\r\n\r\n")
		rest = b.Bytes()
	}
	if _, err := rr.conn.Write(rest); err != nil {
		t.Fatal(err)
	}
}

// answer reads the response; a gateway that waited for the rest of the
// body would never give one, so the read has a deadline.
func (rr *rawRequest) answer(t *testing.T) answer {
	t.Helper()
	rr.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(rr.br, nil)
	if err != nil {
		t.Fatalf("no answer while the body is unsent: %v", err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	a.body, _ = io.ReadAll(resp.Body)
	_ = json.Unmarshal(a.body, &a.env)
	return a
}

// signedHead signs method path with body by id and returns the request whose
// headers sendHead writes.
func (g *gateway) signedHead(id *identity.Identity, method, path string, body []byte) *http.Request {
	g.t.Helper()
	r, err := http.NewRequest(method, g.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	if err := id.Sign(r, identity.SignOptions{Created: g.clock.now()}); err != nil {
		g.t.Fatal(err)
	}
	return r
}

// A refused caller gets its answer after sending the head and a sliver of
// the body: the gateway decides on headers alone and reads no body byte for
// anyone it has not admitted.
func TestBodyUnreadUntilAdmitted(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{submitLimit: 100})
	body := bytes.Repeat([]byte("upload"), 200_000) // 1.2 MB
	addr := strings.TrimPrefix(g.srv.URL, "http://")
	rows := []struct {
		name   string
		req    func() *http.Request
		status int
		code   string
	}{
		{"forged signature", func() *http.Request {
			r := g.signedHead(g.agent, "POST", "/proxy/github/forged", body)
			r.Header.Set("Signature", "sig1=:"+strings.Repeat("A", 86)+"==:")
			return r
		}, 403, "AUTH_SIGNATURE_INVALID"},
		{"no signature at all", func() *http.Request {
			r, _ := http.NewRequest("POST", g.srv.URL+"/proxy/github/unsigned", nil)
			return r
		}, 403, "AUTH_IDENTITY_INVALID"},
		{"signature for another body's digest swapped in", func() *http.Request {
			r := g.signedHead(g.agent, "POST", "/proxy/github/swapped", body)
			r.Header.Set("Content-Digest", "sha-256=:"+strings.Repeat("B", 43)+"=:")
			return r
		}, 403, "AUTH_SIGNATURE_INVALID"},
		{"declared body under a bodiless signature", func() *http.Request {
			return g.signedHead(g.agent, "POST", "/proxy/github/bodiless", nil)
		}, 403, "AUTH_SIGNED_COMPONENTS_INVALID"},
		{"valid signature of an unapproved agent", func() *http.Request {
			return g.signedHead(g.stranger, "POST", "/proxy/github/stranger", body)
		}, 403, "AUTH_CLAIM_REQUIRED"},
		{"disabled connection", func() *http.Request {
			return g.signedHead(g.agent, "POST", "/proxy/off/upload", body)
		}, 403, errcode.ConnectionDisabled.String()},
		{"replay of an approved upload", func() *http.Request {
			r := g.signedHead(g.agent, "POST", "/proxy/github/replayed", body)
			if a := g.do(r); a.status != 200 {
				t.Fatalf("first use: %d %s", a.status, a.body)
			}
			return r
		}, 403, "AUTH_REPLAY_DETECTED"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			rr := sendHead(t, addr, row.req(), body, 1, false)
			a := rr.answer(t)
			if a.status != row.status || a.env["code"] != row.code {
				t.Fatalf("got %d %v, want %d %s", a.status, a.env["code"], row.status, row.code)
			}
			if got := g.handler.bodies.Used(); got != 0 {
				t.Errorf("%d body bytes still held", got)
			}
		})
	}
}

// An admitted caller's body is read and checked against the signed
// content-digest, whatever the framing.
func TestBodyCheckedAfterAdmission(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	addr := strings.TrimPrefix(g.srv.URL, "http://")
	body := bytes.Repeat([]byte("0123456789abcdef"), 5000) // 80 000 bytes: the buffer grows past its first chunk
	huge := bytes.Repeat([]byte{'x'}, DefaultMaxBodyBytes+1)
	rows := []struct {
		name    string
		signed  []byte
		sent    []byte
		chunked bool
		status  int
		code    string
	}{
		{"signed body, length framing", body, body, false, 200, ""},
		{"signed body, chunked framing", body, body, true, 200, ""},
		{"tampered body, same length", body, bytes.ToUpper(body), false, 403, "AUTH_SIGNATURE_INVALID"},
		{"tampered chunked body", body, append(bytes.Clone(body), 'x'), true, 403, "AUTH_SIGNATURE_INVALID"},
		{"chunked body smuggled under a bodiless signature", nil, body, true, 403, "AUTH_SIGNED_COMPONENTS_INVALID"},
		{"signed digest, empty chunked body", body, nil, true, 403, "AUTH_SIGNED_COMPONENTS_INVALID"},
		{"chunked body over the limit", huge, huge, true, 413, "REQUEST_BODY_TOO_LARGE"},
	}
	for i, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			path := fmt.Sprintf("/proxy/github/upload-%d", i)
			r := g.signedHead(g.agent, "POST", path, row.signed)
			rr := sendHead(t, addr, r, row.sent, min(1000, len(row.sent)), row.chunked)
			rr.finish(t, row.chunked)
			a := rr.answer(t)
			if a.status != row.status || row.code != "" && a.env["code"] != row.code {
				t.Fatalf("got %d %v, want %d %s", a.status, a.env["code"], row.status, row.code)
			}
			s := g.up.lastSeen()
			if forwarded := s.Path == "/api"+strings.TrimPrefix(path, "/proxy/github"); forwarded != (row.status == 200) {
				t.Fatalf("upstream saw %s; forwarded = %v", s.Path, forwarded)
			}
			if row.status == 200 && (s.Body != string(row.sent) || s.Header.Get("Content-Length") != fmt.Sprint(len(row.sent))) {
				t.Errorf("upstream got %d bytes (Content-Length %q), want %d", len(s.Body), s.Header.Get("Content-Length"), len(row.sent))
			}
			if got := g.handler.bodies.Used(); got != 0 {
				t.Errorf("%d body bytes still held after the request", got)
			}
		})
	}
}

// The bodies buffered at once stay under MaxInflightBodyBytes: while one
// admitted upload holds its buffer, another that would pass the cap is
// answered 503 with Retry-After, and succeeds once the first is done.
func TestInflightBodyCap(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	g.handler.bodies.Max = 24 << 10
	addr := strings.TrimPrefix(g.srv.URL, "http://")
	body := bytes.Repeat([]byte("z"), 16<<10)

	slow := sendHead(t, addr, g.signedHead(g.agent, "POST", "/proxy/github/slow", body), body, 100, false)
	deadline := time.Now().Add(5 * time.Second)
	for g.handler.bodies.Used() == 0 { // the slow upload is admitted and reading
		if time.Now().After(deadline) {
			t.Fatal("the slow upload never started buffering")
		}
		time.Sleep(time.Millisecond)
	}
	a := g.do(g.request(g.agent, "POST", "/proxy/github/second", string(body)))
	if a.status != 503 || a.env["code"] != errcode.RequestBodyCapacityExhausted.String() || a.header.Get("Retry-After") == "" {
		t.Fatalf("second upload while the first holds the budget: %d %v, Retry-After %q", a.status, a.env["code"], a.header.Get("Retry-After"))
	}
	if a := g.do(g.request(g.agent, "GET", "/proxy/github/small", "")); a.status != 200 {
		t.Fatalf("a bodiless request needs no budget: %d %s", a.status, a.body)
	}
	slow.finish(t, false)
	if a := slow.answer(t); a.status != 200 {
		t.Fatalf("slow upload: %d %s", a.status, a.body)
	}
	if a := g.do(g.request(g.agent, "POST", "/proxy/github/second", string(body))); a.status != 200 {
		t.Fatalf("second upload after the first: %d %s", a.status, a.body)
	}
	if got := g.handler.bodies.Used(); got != 0 {
		t.Errorf("%d body bytes still held", got)
	}
}

// readBody's buffer follows the bytes that arrive: a declared length
// never sizes it beyond the first chunk, and what it holds is what the
// budget was charged.
func TestReadBodyGrowsWithBytesReceived(t *testing.T) {
	t.Parallel()
	const max = 1 << 20
	rows := []struct {
		name     string
		declared int64
		sent     int
		wantErr  error
		maxHeld  int64
	}{
		{"declares the limit, sends ten bytes", max, 10, io.ErrUnexpectedEOF, firstBodyChunk},
		{"undeclared, sends ten bytes", -1, 10, nil, firstBodyChunk},
		{"declared small and exact", 100, 100, nil, 100},
		{"declared exactly one chunk", firstBodyChunk, firstBodyChunk, nil, firstBodyChunk},
		{"undeclared, 100 KB", -1, 100_000, nil, 128 << 10},
		{"declared 100 KB", 100_000, 100_000, nil, 100_000},
		{"undeclared, over the limit", -1, max + 1, &http.MaxBytesError{}, max},
		{"undeclared, exactly the limit", -1, max, nil, max},
		{"empty undeclared", -1, 0, nil, firstBodyChunk},
		{"declared empty", 0, 0, nil, 1},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			src := io.Reader(bytes.NewReader(make([]byte, row.sent)))
			if row.declared > int64(row.sent) {
				src = io.MultiReader(src, errReader{io.ErrUnexpectedEOF}) // the server's framing error
			}
			budget := &bodybudget.Budget{Max: 1 << 30}
			body, held, err := readBody(src, row.declared, max, budget)
			var mbe *http.MaxBytesError
			switch {
			case row.wantErr == nil && err != nil:
				t.Fatalf("err %v", err)
			case errors.As(row.wantErr, &mbe) && !errors.As(err, &mbe):
				t.Fatalf("err %v, want a MaxBytesError", err)
			case row.wantErr != nil && mbe == nil && !errors.Is(err, row.wantErr):
				t.Fatalf("err %v, want %v", err, row.wantErr)
			case err == nil && len(body) != row.sent:
				t.Fatalf("read %d bytes, want %d", len(body), row.sent)
			}
			if held > row.maxHeld || int64(cap(body)) > held {
				t.Errorf("held %d (buffer capacity %d), want at most %d", held, cap(body), row.maxHeld)
			}
			if budget.Used() != held {
				t.Errorf("budget charged %d, held %d", budget.Used(), held)
			}
		})
	}
	t.Run("budget exhausted while growing", func(t *testing.T) {
		budget := &bodybudget.Budget{Max: 40 << 10}
		_, held, err := readBody(bytes.NewReader(make([]byte, 100_000)), -1, max, budget)
		if !errors.Is(err, errBodyBudget) || held > budget.Max || budget.Used() != held {
			t.Fatalf("err %v, held %d of %d", err, held, budget.Max)
		}
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
