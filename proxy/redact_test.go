package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Credentials of the echo connections; the characters that URL and JSON
// encoders escape are there on purpose.
const (
	echoBearer   = "br_echo/secret+token=42"
	echoHeader   = "hk_echo_secret_0042"
	echoQuery    = "qp/echo+secret=99"
	echoVariable = "var_echo_secret_7777"
)

// echoUpstream reflects the credential it received, in the ways real
// upstreams do by accident.
type echoUpstream struct {
	srv     *httptest.Server
	release chan struct{} // lets /split and /events send their second part
	mu      sync.Mutex
	cookie  string // the Cookie header of the last request
}

// credential is what the gateway injected, whichever the mode.
func credential(r *http.Request) string {
	if v := r.Header.Get("Authorization"); v != "" {
		return strings.TrimPrefix(v, "Bearer ")
	}
	if v := r.Header.Get("X-API-Key"); v != "" {
		return v
	}
	return r.URL.Query().Get("api_key")
}

func newEchoUpstream(t *testing.T) *echoUpstream {
	e := &echoUpstream{release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/next/?"+r.URL.RawQuery, http.StatusFound)
	})
	mux.HandleFunc("/redirect-lower", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/next/?"+lowerEscapes(r.URL.RawQuery))
		w.WriteHeader(http.StatusMovedPermanently)
	})
	mux.HandleFunc("/redirect-reencoded", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "https://elsewhere.example/cb?"+r.URL.Query().Encode())
		w.WriteHeader(http.StatusSeeOther)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		for name, values := range r.Header {
			w.Header()["X-Echo-"+name] = values
		}
		w.Header().Set("X-Echo-Url", r.URL.String())
		w.Header().Set("X-"+credential(r), "reflected as a header name")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"headers": r.Header, "url": r.URL.String()})
	})
	mux.HandleFunc("/error-page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "<p>No route for "+r.RequestURI+"</p>")
	})
	mux.HandleFunc("/php-json", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"key":"`+strings.ReplaceAll(credential(r), "/", `\/`)+`"}`)
	})
	mux.HandleFunc("/sized", func(w http.ResponseWriter, r *http.Request) {
		body := "token=" + credential(r) + "\n"
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		io.WriteString(w, body)
	})
	mux.HandleFunc("/split", func(w http.ResponseWriter, r *http.Request) {
		c := credential(r)
		io.WriteString(w, "before "+c[:len(c)/2])
		w.(http.Flusher).Flush()
		<-e.release
		io.WriteString(w, c[len(c)/2:]+" after")
	})
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: "+credential(r)+"\n\n")
		w.(http.Flusher).Flush()
		<-e.release
		io.WriteString(w, "data: second\n\n")
	})
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			io.WriteString(w, credential(r))
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(len(gzipped(credential(r)))))
		w.Write(gzipped(credential(r)))
	})
	mux.HandleFunc("/cookie", func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.cookie = r.Header.Get("Cookie")
		e.mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: "upstream_session", Value: "s1"})
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("/trailer", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Echo-Auth")
		io.WriteString(w, "body")
		w.Header().Set("X-Echo-Auth", credential(r))
	})
	mux.HandleFunc("/early-hints", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css?k="+url.QueryEscape(credential(r))+">; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		io.WriteString(w, "ok")
	})
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() {
		select {
		case <-e.release:
		default:
			close(e.release)
		}
	})
	return e
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(`{"token":"` + s + `"}`))
	zw.Close()
	return b.Bytes()
}

func lowerEscapes(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = bytes.ToLower(b[i+1 : i+2])[0], bytes.ToLower(b[i+2 : i+3])[0]
		}
	}
	return string(b)
}

// newEchoGateway is the test gateway with echo connections, one per
// authentication mode, all of service github (the agent's claim).
func newEchoGateway(t *testing.T) (*gateway, *echoUpstream) {
	g := newGateway(t, gatewayOptions{})
	e := newEchoUpstream(t)
	ctx := context.Background()
	if _, _, err := g.vault.PutVariable(ctx, "ECHO_TOKEN", echoVariable, ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		conn   credvault.Connection
		secret string
	}{
		{credvault.Connection{ID: "echo-bearer", AuthMode: "bearer"}, echoBearer},
		{credvault.Connection{ID: "echo-header", AuthMode: "header_key"}, echoHeader},
		{credvault.Connection{ID: "echo-query", AuthMode: "query_param"}, echoQuery},
		{credvault.Connection{ID: "echo-template", AuthMode: "header_key"}, "{{ECHO_TOKEN}}"},
		{credvault.Connection{ID: "echo-cookies", AuthMode: "bearer", AllowUpstreamCookies: true}, echoBearer},
	} {
		c.conn.Protocol, c.conn.BaseURL, c.conn.Service, c.conn.AuthSecretKey = "http", e.srv.URL, "github", "k"
		if _, err := g.vault.Create(ctx, &c.conn, map[string]string{"k": c.secret}); err != nil {
			t.Fatal(err)
		}
	}
	return g, e
}

// rawClient neither follows redirects nor decompresses, so the test sees
// exactly what the gateway sent.
var rawClient = &http.Client{
	Transport:     &http.Transport{DisableCompression: true},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

type rawAnswer struct {
	status  int
	header  http.Header
	trailer http.Header
	early   []http.Header // headers of 1xx answers
	body    string
	length  int64
}

func fetch(t *testing.T, r *http.Request) rawAnswer {
	t.Helper()
	var a rawAnswer
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			a.early = append(a.early, http.Header(h).Clone())
			return nil
		},
	}))
	resp, err := rawClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a.status, a.header, a.trailer, a.body, a.length = resp.StatusCode, resp.Header, resp.Trailer, string(b), resp.ContentLength
	return a
}

// leaks lists where any wire form of secret shows in the answer.
func (a rawAnswer) leaks(secret string) []string {
	forms := []string{secret, url.QueryEscape(secret), url.PathEscape(secret), lowerEscapes(url.QueryEscape(secret)),
		strings.ReplaceAll(secret, "/", `\/`)}
	var found []string
	check := func(where, s string) {
		for _, f := range forms {
			if strings.Contains(strings.ToLower(s), strings.ToLower(f)) {
				found = append(found, where+": "+s)
				return
			}
		}
	}
	for _, h := range append([]http.Header{a.header, a.trailer}, a.early...) {
		for name, values := range h {
			check("header name", name)
			for _, v := range values {
				check(name, v)
			}
		}
	}
	check("body", a.body)
	return found
}

func TestCredentialReflection(t *testing.T) {
	t.Parallel()
	g, _ := newEchoGateway(t)
	cases := []struct {
		name   string
		path   string
		secret string
		header string // a header whose value must hold the mark
		body   string // a substring the body must hold
	}{
		{"query_param_redirect_location", "/proxy/echo-query/redirect?page=2", echoQuery, "Location", ""},
		{"query_param_redirect_lowercase_escapes", "/proxy/echo-query/redirect-lower?page=2", echoQuery, "Location", ""},
		{"query_param_redirect_reencoded_elsewhere", "/proxy/echo-query/redirect-reencoded", echoQuery, "Location", ""},
		{"query_param_error_page_echoes_url", "/proxy/echo-query/error-page?q=1", echoQuery, "", "[redacted]"},
		{"query_param_headers_and_url_echoed", "/proxy/echo-query/echo", echoQuery, "X-Echo-Url", "[redacted]"},
		{"bearer_header_echo", "/proxy/echo-bearer/echo", echoBearer, "X-Echo-Authorization", "[redacted]"},
		{"header_key_header_echo", "/proxy/echo-header/echo", echoHeader, "X-Echo-X-Api-Key", "[redacted]"},
		{"variable_credential_header_echo", "/proxy/echo-template/echo", echoVariable, "X-Echo-X-Api-Key", "[redacted]"},
		{"json_body_with_escaped_slashes", "/proxy/echo-bearer/php-json", echoBearer, "", `{"key":"[redacted]"}`},
		{"body_with_content_length", "/proxy/echo-bearer/sized", echoBearer, "", "token=[redacted]\n"},
		{"trailer_echo", "/proxy/echo-bearer/trailer", echoBearer, "", "body"},
		{"early_hints_link_echo", "/proxy/echo-bearer/early-hints", echoBearer, "", "ok"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := fetch(t, g.request(g.agent, "GET", c.path, ""))
			if a.status == http.StatusForbidden || a.status >= 500 {
				t.Fatalf("status %d: %s", a.status, a.body)
			}
			if leaks := a.leaks(c.secret); len(leaks) > 0 {
				t.Fatalf("credential reached the agent: %q", leaks)
			}
			if c.header != "" && !strings.Contains(a.header.Get(c.header), redactedMark) {
				t.Errorf("%s = %q, want the credential marked %s", c.header, a.header.Get(c.header), redactedMark)
			}
			if !strings.Contains(a.body, c.body) {
				t.Errorf("body = %q, want it to contain %q", a.body, c.body)
			}
			if cl := a.header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(a.body)) {
				t.Errorf("Content-Length %s for a %d-byte body", cl, len(a.body))
			}
		})
	}
	// The redirect still works through the gateway: the placeholder is
	// replaced by the real credential again.
	a := fetch(t, g.request(g.agent, "GET", "/proxy/echo-query/redirect?page=2", ""))
	next := strings.TrimPrefix(a.header.Get("Location"), "/next/")
	if next != "?page=2&api_key=%5Bredacted%5D" && next != "?page=2&api_key=[redacted]" {
		t.Errorf("Location = %q", a.header.Get("Location"))
	}
}

func TestRedactedBodySplitAcrossReads(t *testing.T) {
	t.Parallel()
	g, e := newEchoGateway(t)
	resp, err := rawClient.Do(g.request(g.agent, "GET", "/proxy/echo-header/split", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// What cannot begin the credential arrives before the upstream sends the
	// rest; the credential's first half is held back.
	head := make([]byte, len("before "))
	if _, err := io.ReadFull(resp.Body, head); err != nil || string(head) != "before " {
		t.Fatalf("head %q, %v", head, err)
	}
	close(e.release)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "[redacted] after" {
		t.Fatalf("rest = %q, want the split credential redacted", rest)
	}
}

func TestRedactedEventStreamStillStreams(t *testing.T) {
	t.Parallel()
	g, e := newEchoGateway(t)
	resp, err := rawClient.Do(g.request(g.agent, "GET", "/proxy/echo-bearer/events", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// The first event arrives while the upstream is still blocked.
	if line, err := br.ReadString('\n'); err != nil || line != "data: [redacted]\n" {
		t.Fatalf("first event: %q, %v", line, err)
	}
	close(e.release)
	_, _ = br.ReadString('\n')
	if line, _ := br.ReadString('\n'); line != "data: second\n" {
		t.Fatalf("second event: %q", line)
	}
}

func TestAgentCannotHideAnEchoInGzip(t *testing.T) {
	t.Parallel()
	g, _ := newEchoGateway(t)
	r := g.request(g.agent, "GET", "/proxy/echo-bearer/gzip", "")
	r.Header.Set("Accept-Encoding", "gzip")
	a := fetch(t, r)
	if a.status != 200 || strings.Contains(a.body, echoBearer) || !strings.Contains(a.body, "[redacted]") {
		t.Fatalf("agent that asked for gzip got status %d, body %q", a.status, a.body)
	}
}

func TestUpstreamCookies(t *testing.T) {
	t.Parallel()
	g, e := newEchoGateway(t)
	cases := []struct {
		name       string
		conn       string
		wantCookie bool
	}{
		{"set_cookie_dropped_by_default", "echo-bearer", false},
		{"set_cookie_kept_with_allow_upstream_cookies", "echo-cookies", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := fetch(t, g.request(g.agent, "GET", "/proxy/"+c.conn+"/cookie", ""))
			if a.status != 200 {
				t.Fatalf("status %d: %s", a.status, a.body)
			}
			if got := a.header.Get("Set-Cookie") != ""; got != c.wantCookie {
				t.Errorf("Set-Cookie %q, want present=%v", a.header.Get("Set-Cookie"), c.wantCookie)
			}
			e.mu.Lock()
			sent := e.cookie
			e.mu.Unlock()
			if got := sent == "session=agent-cookie"; got != c.wantCookie {
				t.Errorf("upstream received Cookie %q, want the agent's only with the opt-in", sent)
			}
		})
	}
}

// FuzzRedactingBody checks the streaming redactor against
// strings.NewReplacer on the whole input (strings.ReplaceAll for a single
// form), however the input is cut into reads and however small the reader's
// buffer, and that it never holds back a whole form.
func FuzzRedactingBody(f *testing.F) {
	f.Add("secret", "", []byte("a secret in a secret body secre"), []byte{3, 1, 7})
	f.Add("aab", "ab", []byte("aaabaabab"), []byte{1})
	f.Add("abcXabZ", "abc", []byte("abcXabcXabZ"), []byte{2, 5})
	f.Add("Bearer tok", "tok", []byte("Bearer tok, tok, Bearer to"), []byte{0, 4})
	f.Add("x", "", []byte("xxx"), []byte{1})
	f.Fuzz(func(t *testing.T, a, b string, body, cuts []byte) {
		var forms []string
		for _, s := range []string{a, b} {
			if s != "" && (len(forms) == 0 || forms[0] != s) {
				forms = append(forms, s)
			}
		}
		if len(forms) == 0 {
			return
		}
		if len(forms) == 2 && len(forms[1]) > len(forms[0]) {
			forms[0], forms[1] = forms[1], forms[0]
		}
		var want string
		if len(forms) == 1 {
			want = strings.ReplaceAll(string(body), forms[0], redactedMark)
		} else {
			want = strings.NewReplacer(forms[0], redactedMark, forms[1], redactedMark).Replace(string(body))
		}
		rb := newRedactingBody(io.NopCloser(&choppy{data: body, cuts: cuts}), forms)
		defer rb.Close()
		var got []byte
		buf := make([]byte, 1+len(cuts)%5)
		for {
			n, err := rb.Read(buf)
			got = append(got, buf[:n]...)
			if held := len(rb.held); held >= rb.m.maxLen {
				t.Fatalf("holds back %d bytes with a longest form of %d", held, rb.m.maxLen)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if string(got) != want {
			t.Fatalf("forms %q on %q: got %q, want %q", forms, body, got, want)
		}
	})
}

// choppy returns its data in reads of the sizes given by cuts, in turn
// (0 is a read that returns nothing).
type choppy struct {
	data  []byte
	cuts  []byte
	i     int
	empty bool // the last read returned nothing
}

func (c *choppy) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.cuts) > 0 {
		n = int(c.cuts[c.i%len(c.cuts)]) % 9
		c.i++
		if n == 0 && c.empty { // two empty reads in a row would be a stall
			n = 1
		}
		c.empty = n == 0
	}
	n = min(n, len(c.data), len(p))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// An MCP tool that echoes its request headers must not hand the credential
// to the agent either.
func TestMCPToolResultReflection(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "debug.headers", Description: "shows what the server received"},
		func(_ context.Context, req *mcp.CallToolRequest, _ echoArgs) (*mcp.CallToolResult, any, error) {
			auth := req.Extra.Header.Get("Authorization")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you sent " + auth}}},
				map[string]string{"authorization": auth}, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(up.Close)
	g := newGateway(t, gatewayOptions{mcpUpstream: up.URL})
	a := g.do(g.request(g.agent, "POST", "/mcp/tools/tools/debug.headers/call", `{"text":"x"}`))
	if a.status != 200 {
		t.Fatalf("call: %d %s", a.status, a.body)
	}
	if strings.Contains(string(a.body), upstreamToken) || !strings.Contains(string(a.body), "you sent [redacted]") ||
		!strings.Contains(string(a.body), `"authorization":"[redacted]"`) {
		t.Fatalf("tool result = %s", a.body)
	}
}

// BenchmarkRedactingBody16K is the redactor's own cost on a 16 KiB body
// that holds no credential, read as ReverseProxy reads it, against a plain
// copy of the same body.
func BenchmarkRedactingBody16K(b *testing.B) {
	body := bytes.Repeat([]byte(`{"id":12345,"name":"repository","private":false},`), 400)[:16<<10]
	forms := []string{"Bearer " + upstreamToken, upstreamToken}
	buf := make([]byte, 32<<10)
	for _, redact := range []bool{false, true} {
		b.Run("redact="+strconv.FormatBool(redact), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var r io.ReadCloser = io.NopCloser(bytes.NewReader(body))
				if redact {
					r = newRedactingBody(r, forms)
				}
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf); err != nil {
					b.Fatal(err)
				}
				r.Close()
			}
		})
	}
}

// TestRedactOnce: every occurrence of a credential form becomes one mark
// in one pass, in bodies and headers alike: a mark is never searched
// again, so a form listed twice, or a secret that occurs inside
// "[redacted]", cannot nest marks.
func TestRedactOnce(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name  string
		forms []string
		in    string
		want  string
	}{
		{"one_letter_secret_listed_in_identical_forms", []string{"t", "t", "t"}, "everything", "every[redacted]hing"},
		{"secret_inside_the_mark", []string{"Bearer redacted", "redacted", "redacted"}, "Bearer redacted, then redacted", "[redacted], then [redacted]"},
		{"adjacent_occurrences", []string{"k3y-secret"}, "k3y-secretk3y-secret", "[redacted][redacted]"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			body := newRedactingBody(io.NopCloser(strings.NewReader(row.in)), row.forms)
			got, err := io.ReadAll(body)
			if err != nil || string(got) != row.want {
				t.Errorf("body = %q, %v; want %q", got, err, row.want)
			}
			h := http.Header{"X-Echo": {row.in}}
			redactHeader(h, row.forms)
			if h.Get("X-Echo") != row.want {
				t.Errorf("header = %q, want %q", h.Get("X-Echo"), row.want)
			}
		})
	}
}
