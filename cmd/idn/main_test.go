package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/replay"
)

// verifyingServer answers "<namespace>/<subject> <body>" for requests the
// profile verifier accepts, and 403 with the error code otherwise.
func verifyingServer(t *testing.T) *httptest.Server {
	ver := &identity.Verifier{Nonces: mustReplay()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := ver.Verify(r)
		if err != nil {
			w.WriteHeader(http.StatusForbidden)
			code, _ := identity.AuthCode(err)
			_, _ = io.WriteString(w, code.String())
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Verified", "yes")
		_, _ = io.WriteString(w, c.Namespace+"/"+c.Subject+" "+string(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

type result struct {
	code           int
	stdout, stderr string
}

func runIdn(t *testing.T, home string, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if k == "IDN_HOME" {
			return home
		}
		return ""
	}
	code := run(args, env{strings.NewReader(stdin), &out, &errb, getenv})
	return result{code, out.String(), errb.String()}
}

func TestInitThenCurl(t *testing.T) {
	home := t.TempDir()
	srv := verifyingServer(t)
	r := runIdn(t, home, "", "init", "agent-smith")
	if r.code != 0 || !strings.Contains(r.stdout, "did:idn:agent-smith") || !strings.Contains(r.stdout, "ed25519:") {
		t.Fatalf("init: %+v", r)
	}
	r = runIdn(t, home, "", "curl", srv.URL+"/v1/things?a=b%2Fc")
	if r.code != 0 || r.stdout != "agent-smith/agent-smith " {
		t.Fatalf("curl GET: %+v", r)
	}
	r = runIdn(t, home, "", "curl", "-i", srv.URL+"/v1/things", "-d", `{"x":1}`, "--subject", "user-9", "-H", "Content-Type: application/json")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "HTTP/1.1 200 OK\n") || !strings.Contains(r.stdout, "X-Verified: yes") ||
		!strings.HasSuffix(r.stdout, "agent-smith/user-9 {\"x\":1}") {
		t.Fatalf("curl POST: %+v", r)
	}
	r = runIdn(t, home, `{"from":"stdin"}`, "curl", "-X", "PUT", "-d", "@-", srv.URL+"/put")
	if r.code != 0 || !strings.HasSuffix(r.stdout, `{"from":"stdin"}`) {
		t.Fatalf("curl -d @-: %+v", r)
	}
	r = runIdn(t, home, "", "whoami")
	if r.code != 0 || !strings.Contains(r.stdout, "agent-smith") {
		t.Fatalf("whoami: %+v", r)
	}
}

// The headers printed by sign, added to a plain request, pass verification.
func TestSignHeadersVerify(t *testing.T) {
	home := t.TempDir()
	srv := verifyingServer(t)
	runIdn(t, home, "", "init", "signer")
	r := runIdn(t, home, "", "sign", "-X", "POST", "-d", "hello", srv.URL+"/echo")
	if r.code != 0 {
		t.Fatalf("sign: %+v", r)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/echo", strings.NewReader("hello"))
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		name, value, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("bad line %q", line)
		}
		req.Header.Set(name, value)
	}
	if req.Header.Get("Content-Digest") == "" {
		t.Fatalf("no content-digest printed:\n%s", r.stdout)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(got) != "signer/signer hello" {
		t.Fatalf("server: %d %s", resp.StatusCode, got)
	}
}

func TestErrorsAreOneLine(t *testing.T) {
	empty := t.TempDir()
	two := t.TempDir()
	runIdn(t, two, "", "init", "first")
	runIdn(t, two, "", "init", "second")
	rows := []struct {
		name, home string
		args       []string
		code       int
		want       string
	}{
		{"missing identity", empty, []string{"curl", "http://127.0.0.1:1/x"}, 1, "no identity in"},
		{"missing named identity", empty, []string{"whoami", "--namespace", "ghost"}, 1, `no identity "ghost"`},
		{"bad namespace", empty, []string{"init", "no_underscores"}, 2, "bad namespace"},
		{"short namespace", empty, []string{"init", "ab"}, 2, "bad namespace"},
		{"namespace path traversal", empty, []string{"init", "../../etc"}, 2, "bad namespace"},
		{"malformed -H", two, []string{"sign", "--namespace", "first", "-H", "NoColonHere", "http://x.example/"}, 2, "malformed -H"},
		{"header injection", two, []string{"sign", "--namespace", "first", "-H", "Bad Name: v", "http://x.example/"}, 2, "malformed -H"},
		{"relative URL", two, []string{"sign", "--namespace", "first", "/just/a/path"}, 2, "not an absolute"},
		{"ambiguous identity", two, []string{"whoami"}, 1, "several identities"},
		{"existing identity", two, []string{"init", "first"}, 1, "--force"},
		{"unknown flag", two, []string{"sign", "--bogus", "http://x.example/"}, 2, "bogus"},
		{"unknown command", two, []string{"frobnicate"}, 2, "unknown command"},
		{"missing body file", two, []string{"sign", "--namespace", "first", "-d", "@/nonexistent/file", "http://x.example/"}, 1, "read body file"},
		{"unreachable", two, []string{"curl", "--namespace", "first", "http://127.0.0.1:1/x?token=s3cr3t"}, 1, "GET http://127.0.0.1:1/x:"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := runIdn(t, row.home, "", row.args...)
			if r.code != row.code {
				t.Errorf("exit = %d, want %d (%+v)", r.code, row.code, r)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "idn: ") || !strings.Contains(r.stderr, row.want) {
				t.Errorf("stderr = %q, want one line containing %q", r.stderr, row.want)
			}
			if strings.Contains(r.stderr, "s3cr3t") || strings.Contains(r.stderr, "goroutine") {
				t.Errorf("stderr leaks: %q", r.stderr)
			}
		})
	}
}

func TestInitForceReplacesKey(t *testing.T) {
	home := t.TempDir()
	a := runIdn(t, home, "", "init", "rotating")
	b := runIdn(t, home, "", "init", "rotating", "--force")
	if a.code != 0 || b.code != 0 || a.stdout == b.stdout {
		t.Fatalf("force did not replace the key:\n%s\n%s", a.stdout, b.stdout)
	}
}

func TestCurlFail(t *testing.T) {
	home := t.TempDir()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusForbidden)
	}))
	defer srv.Close()
	runIdn(t, home, "", "init", "failing")
	if r := runIdn(t, home, "", "curl", "-f", srv.URL); r.code != 22 {
		t.Errorf("curl -f on 403: exit %d", r.code)
	}
	if r := runIdn(t, home, "", "curl", srv.URL); r.code != 0 || r.stdout != "nope\n" {
		t.Errorf("curl on 403: %+v", r)
	}
}

func mustReplay() *replay.Store {
	s, err := replay.New(replay.Config{})
	if err != nil {
		panic(err)
	}
	return s
}

// Every command answers -h with its usage, flags and the variables it
// reads, and --version with the version; none of them touches the home.
func TestHelpAndVersion(t *testing.T) {
	home := t.TempDir()
	for _, cmd := range []string{"", "init", "whoami", "sign", "curl"} {
		for _, flag := range []string{"-h", "--help", "--version", "-version"} {
			args := []string{flag}
			if cmd != "" {
				args = []string{cmd, flag}
			}
			t.Run(strings.Join(args, "_"), func(t *testing.T) {
				r := runIdn(t, home, "", args...)
				if r.code != 0 || r.stderr != "" {
					t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
				}
				if strings.HasSuffix(flag, "version") {
					if !strings.HasPrefix(r.stdout, "idn ") || strings.Count(r.stdout, "\n") != 1 {
						t.Errorf("version output %q", r.stdout)
					}
					return
				}
				for _, want := range []string{"sage", "-version", "Environment:", "IDN_HOME"} {
					if !strings.Contains(r.stdout, want) {
						t.Errorf("help lacks %q:\n%s", want, r.stdout)
					}
				}
				if cmd != "" && !strings.HasPrefix(r.stdout, "usage: idn "+cmd) {
					t.Errorf("help does not start with the command's usage:\n%s", r.stdout)
				}
			})
		}
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("help created %d entries in the home", len(entries))
	}
}

// An agent gets a display name at init or later (same key, so approvals
// stand), and every printing command answers --json.
func TestNameAndJSON(t *testing.T) {
	home := t.TempDir()
	r := runIdn(t, home, "", "init", "named-agent", "--name", "Invoice bot", "--json")
	var created map[string]string
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &created) != nil || created["name"] != "Invoice bot" ||
		created["did"] != "did:idn:named-agent" || !strings.HasPrefix(created["publicKey"], "ed25519:") {
		t.Fatalf("init --name --json: %+v", r)
	}
	if strings.Contains(r.stdout, "privateKey") {
		t.Fatalf("--json printed the private key: %s", r.stdout)
	}
	r = runIdn(t, home, "", "init", "named-agent", "--name", "Billing bot")
	if r.code != 0 || !strings.Contains(r.stdout, "Renamed identity named-agent") || !strings.Contains(r.stdout, "Name:       Billing bot") {
		t.Fatalf("rename: %+v", r)
	}
	r = runIdn(t, home, "", "whoami", "--json")
	var who map[string]string
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &who) != nil || who["name"] != "Billing bot" || who["publicKey"] != created["publicKey"] {
		t.Fatalf("whoami --json after rename: %+v", r)
	}
	r = runIdn(t, home, "", "init", "named-agent", "--name", "bad\u202ename")
	if r.code != 2 || !strings.Contains(r.stderr, "bad --name") {
		t.Fatalf("invisible character in --name: %+v", r)
	}
	r = runIdn(t, home, "", "init", "named-agent")
	if r.code != 1 || !strings.Contains(r.stderr, "--name to rename") {
		t.Fatalf("init over an identity: %+v", r)
	}

	srv := verifyingServer(t)
	r = runIdn(t, home, "", "sign", "--json", "-d", "{}", srv.URL+"/x")
	var hs map[string]string
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &hs) != nil || hs["content-digest"] == "" || hs["signature"] == "" || hs["idn-agent-cert"] == "" {
		t.Fatalf("sign --json: %+v", r)
	}
	cert, err := identity.DecodeCertificateHeader(hs["idn-agent-cert"])
	if err != nil || cert.Name != "Billing bot" {
		t.Fatalf("signed certificate name: %v %+v", err, cert)
	}
	r = runIdn(t, home, "", "curl", "--json", srv.URL+"/x")
	var answer struct {
		Status  int                 `json:"status"`
		Headers map[string][]string `json:"headers"`
		Body    string              `json:"body"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &answer) != nil || answer.Status != 200 ||
		answer.Headers["X-Verified"][0] != "yes" || answer.Body != "named-agent/named-agent " {
		t.Fatalf("curl --json: %+v", r)
	}
}
