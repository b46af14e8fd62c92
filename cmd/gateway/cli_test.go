package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/mcpproxy"
)

// cliChildArgsEnv makes the test binary act as the gateway CLI: it runs the
// JSON-encoded argument list and exits with its status.
const cliChildArgsEnv = "GATEWAY_TEST_CLI_ARGS"

func TestMain(m *testing.M) {
	if raw := os.Getenv(cliChildArgsEnv); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintln(os.Stderr, "bad", cliChildArgsEnv)
			os.Exit(3)
		}
		os.Exit(run(context.Background(), args, os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const cliMasterKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

type cliResult struct {
	stdout, stderr string
	code           int
}

// cliRunner runs commands in-process against one data directory and keeps
// everything they printed for secret scanning.
type cliRunner struct {
	t   *testing.T
	env map[string]string
	out []string
}

func newCLIRunner(t *testing.T) *cliRunner {
	return &cliRunner{t: t, env: map[string]string{"GATEWAY_DATA_DIR": filepath.Join(t.TempDir(), "data"), "GATEWAY_MASTER_KEY": cliMasterKey}}
}

func (c *cliRunner) run(args ...string) cliResult {
	c.t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return c.env[k] }, &stdout, &stderr)
	c.out = append(c.out, stdout.String(), stderr.String())
	if code != 0 {
		if lines := strings.Count(stderr.String(), "\n"); lines != 1 && !strings.HasPrefix(stderr.String(), "gateway: unknown command") &&
			!strings.HasPrefix(stderr.String(), "usage:") && !strings.Contains(stderr.String(), "configuration problems:\n  - ") {
			c.t.Fatalf("%v: stderr has %d lines, want 1: %q", args, lines, stderr.String())
		}
		if strings.Contains(stderr.String(), "goroutine") || strings.Contains(stderr.String(), "panic") {
			c.t.Fatalf("%v: stack trace on stderr: %s", args, stderr.String())
		}
	}
	return cliResult{stdout.String(), stderr.String(), code}
}

func (c *cliRunner) assertNoSecrets(secrets ...string) {
	c.t.Helper()
	all := strings.Join(c.out, "\n")
	for _, s := range secrets {
		if strings.Contains(all, s) {
			c.t.Fatalf("secret %q printed by the CLI", s)
		}
	}
}

func TestCLIWorkflow(t *testing.T) {
	t.Parallel()
	const (
		secret  = "cli_SECRET_4be6d2"
		rotated = "cli_ROTATED_91ac3f"
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token "+secret {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer up.Close()
	c := newCLIRunner(t)

	r := c.run("keygen")
	if r.code != 0 {
		t.Fatalf("keygen: %+v", r)
	}
	if _, err := credvault.ParseMasterKey(strings.TrimSpace(r.stdout)); err != nil {
		t.Fatalf("keygen printed an unusable key: %v", err)
	}

	r = c.run("add", "--id", "gh", "--name", "GitHub", "--base-url", up.URL, "--auth-mode", "bearer", "--auth-prefix", "token ",
		"--auth-secret-key", "token", "--secret", "token="+secret, "--secret", "other=other-secret")
	if r.code != 0 || !strings.Contains(r.stdout, "gh") || !strings.Contains(r.stdout, "other,token") {
		t.Fatalf("add: %+v", r)
	}
	r = c.run("add", "--id", "mcp1", "--protocol", "mcp", "--base-url", "http://127.0.0.1:9", "--mcp-endpoint", "/mcp",
		"--mcp-allow", "repo.*", "--mcp-deny", "repo.delete", "--service", "github-tools", "--mcp-expose-prompts", "--json")
	var m credvault.Connection
	var ms mcpproxy.Settings
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil || json.Unmarshal([]byte(r.stdout), &ms) != nil ||
		ms.Transport != "streamable_http" || len(ms.ToolDenylist) != 1 || ms.Endpoint != "/mcp" ||
		m.ServiceSlug() != "github-tools" || !ms.ExposePrompts || ms.ExposeResources {
		t.Fatalf("add mcp --json: %+v", r)
	}
	r = c.run("list")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "ID") || !strings.Contains(r.stdout, "mcp1") || !strings.Contains(r.stdout, up.URL) {
		t.Fatalf("list: %+v", r)
	}
	r = c.run("list", "--json")
	var list []credvault.Connection
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list) != 2 {
		t.Fatalf("list --json: %+v", r)
	}
	if r = c.run("test", "--id", "gh", "--path", "/user"); r.code != 0 || !strings.Contains(r.stdout, "ok status=200") {
		t.Fatalf("test: %+v", r)
	}
	if r = c.run("rotate", "--id", "gh", "--secret", "token="+rotated, "--delete-secret", "other", "--reason", "compromised"); r.code != 0 || !strings.Contains(r.stdout, "version 2") {
		t.Fatalf("rotate: %+v", r)
	}
	if r = c.run("test", "--id", "gh", "--json"); r.code != 1 || !strings.Contains(r.stdout, `"status": 401`) || !strings.Contains(r.stderr, "401") {
		t.Fatalf("test after rotation to a refused credential: %+v", r)
	}
	if r = c.run("delete", "--id", "gh"); r.code != 0 {
		t.Fatalf("delete: %+v", r)
	}
	r = c.run("add", "--id", "cookies", "--base-url", up.URL, "--auth-mode", "bearer", "--secret", "t="+secret,
		"--allow-upstream-cookies", "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil || !m.AllowUpstreamCookies {
		t.Fatalf("add --allow-upstream-cookies: %+v", r)
	}
	r = c.run("add", "--id", "bank", "--base-url", up.URL, "--auth-mode", "bearer", "--secret", "t="+secret,
		"--approval-route", "POST /v1/payments", "--approval-route", "DELETE /v1/accounts/*", "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil || strings.Join(m.ApprovalRoutes, ",") != "POST /v1/payments,DELETE /v1/accounts/*" {
		t.Fatalf("add --approval-route: %+v", r)
	}
	r = c.run("add", "--id", "pay-tools", "--protocol", "mcp", "--base-url", "http://127.0.0.1:9", "--approval-tool", "payments.*", "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil || strings.Join(m.ApprovalTools, ",") != "payments.*" {
		t.Fatalf("add --approval-tool: %+v", r)
	}
	r = c.run("add", "--id", "team-bank", "--base-url", up.URL, "--auth-mode", "bearer", "--secret", "t="+secret,
		"--approval-subject-route", "alice=POST /v1/payments", "--approval-subject-route", "alice=DELETE /v1/*", "--approval-subject-route", "bob=POST /v1/payments", "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil ||
		strings.Join(m.ApprovalSubjects["alice"].Routes, ",") != "POST /v1/payments,DELETE /v1/*" || len(m.ApprovalSubjects["bob"].Routes) != 1 {
		t.Fatalf("add --approval-subject-route: %+v", r)
	}
	r = c.run("add", "--id", "team-tools", "--protocol", "mcp", "--base-url", "http://127.0.0.1:9", "--approval-subject-tool", "alice=payments.*", "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil || strings.Join(m.ApprovalSubjects["alice"].Tools, ",") != "payments.*" {
		t.Fatalf("add --approval-subject-tool: %+v", r)
	}

	failures := []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"no_command_is_serve_or_usage", nil, nil, -1, ""},
		{"unknown_command", nil, []string{"frobnicate"}, 2, "unknown command"},
		{"unknown_flag", nil, []string{"list", "--frob"}, 2, "flag provided but not defined"},
		{"secret_without_equals_not_echoed", nil, []string{"add", "--id", "x", "--secret", secret}, 2, "--secret number 1 is not name=value"},
		{"positional_secret_typo_not_echoed", nil, []string{"rotate", "--id", "x", secret}, 2, "unexpected positional arguments"},
		{"missing_id", nil, []string{"delete"}, 2, "--id is required"},
		{"invalid_id", nil, []string{"delete", "--id", "../x"}, 1, "invalid id"},
		{"unknown_connection", nil, []string{"delete", "--id", "nope"}, 1, "connection not found"},
		{"duplicate_id", nil, []string{"add", "--id", "mcp1", "--protocol", "mcp", "--base-url", "http://127.0.0.1:9"}, 1, "already exists"},
		{"approval_route_without_method", nil, []string{"add", "--id", "z", "--base-url", "https://x.example", "--auth-mode", "bearer", "--secret", "t=" + secret,
			"--approval-route", "/v1/payments"}, 1, "approval_routes"},
		{"approval_subject_tool_on_http", nil, []string{"add", "--id", "z", "--base-url", "https://x.example", "--auth-mode", "bearer", "--secret", "t=" + secret,
			"--approval-subject-tool", "alice=pay*"}, 1, "approval_subjects"},
		{"approval_subject_without_pattern", nil, []string{"add", "--id", "z", "--base-url", "https://x.example", "--approval-subject-route", "alice"}, 2, "invalid value for flag -approval-subject-route"},
		{"bad_base_url", nil, []string{"add", "--id", "y", "--base-url", "ftp://x", "--auth-mode", "bearer", "--secret", "t=" + secret}, 1, "base_url"},
		{"no_master_key", map[string]string{"GATEWAY_MASTER_KEY": ""}, []string{"list"}, 2, "gateway keygen"},
		{"malformed_master_key", map[string]string{"GATEWAY_MASTER_KEY": "not-a-key"}, []string{"list"}, 2, "gateway keygen"},
		{"wrong_master_key", map[string]string{"GATEWAY_MASTER_KEY": "ZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmY="}, []string{"list"}, 1, "does not match this store"},
		{"master_key_flag_wins", map[string]string{"GATEWAY_MASTER_KEY": "not-a-key"}, []string{"list", "--master-key", cliMasterKey}, 0, ""},
	}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			saved := map[string]string{}
			for k, v := range f.env {
				saved[k] = c.env[k]
				c.env[k] = v
			}
			defer func() {
				for k, v := range saved {
					c.env[k] = v
				}
			}()
			if f.code < 0 { // depends on whether a default command is registered
				if defaultCommand == "" {
					if r := c.run(f.args...); r.code != 2 || !strings.Contains(r.stderr, "usage:") {
						t.Fatalf("no command: %+v", r)
					}
				}
				return
			}
			r := c.run(f.args...)
			if r.code != f.code || !strings.Contains(r.stderr, f.want) {
				t.Fatalf("got %+v, want exit %d and %q", r, f.code, f.want)
			}
		})
	}
	c.assertNoSecrets(secret, rotated)
}

// TestCLIAddVisibleToServingProcess runs `gateway add` as a separate
// process while this process holds a polling vault on the same data
// directory, and waits for the new connection to appear.
func TestCLIAddVisibleToServingProcess(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	key, _ := credvault.ParseMasterKey(cliMasterKey)
	st, err := sqlitestore.Open(context.Background(), filepath.Join(dir, sqlitestore.DefaultFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	serving, err := credvault.New(context.Background(), credvault.Config{Store: st, MasterKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer serving.Close()

	args, _ := json.Marshal([]string{"add", "--id", "fromcli", "--base-url", "https://api.example.com", "--auth-mode", "header_key", "--secret", "k=cli-secret"})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), cliChildArgsEnv+"="+string(args), "GATEWAY_DATA_DIR="+dir, "GATEWAY_MASTER_KEY="+cliMasterKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gateway add: %v: %s", err, out)
	}
	committed := time.Now()
	deadline := committed.Add(time.Second)
	for {
		if r, ok := serving.Lookup("fromcli"); ok {
			if s, err := r.Secret(); err != nil || s != "cli-secret" {
				t.Fatalf("serving process sees secret %q, %v", s, err)
			}
			t.Logf("visible %v after the CLI exited", time.Since(committed))
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("connection added by the CLI not visible to the serving process within one second")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCLISecretFromStdin runs the binary with --secret name=- and the value
// on standard input: it is stored, and never printed.
func TestCLISecretFromStdin(t *testing.T) {
	t.Parallel()
	const secret = "stdin_SECRET_0c7e52"
	dir := filepath.Join(t.TempDir(), "data")
	runChild := func(stdin string, args ...string) (string, error) {
		raw, _ := json.Marshal(args)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), cliChildArgsEnv+"="+string(raw), "GATEWAY_DATA_DIR="+dir, "GATEWAY_MASTER_KEY="+cliMasterKey)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if strings.Contains(string(out), secret) {
			t.Fatalf("secret printed: %s", out)
		}
		return string(out), err
	}
	if out, err := runChild(secret+"\n", "add", "--id", "s", "--base-url", "https://api.example.com", "--auth-mode", "bearer", "--secret", "token=-"); err != nil {
		t.Fatalf("add: %v: %s", err, out)
	}
	if out, err := runChild("", "rotate", "--id", "s", "--secret", "token=-"); err == nil || !strings.Contains(out, "standard input was empty") {
		t.Fatalf("rotate with empty stdin: %v: %s", err, out)
	}
	if out, err := runChild("a\nb\n", "rotate", "--id", "s", "--secret", "a=-", "--secret", "b=-"); err == nil || !strings.Contains(out, "only one --secret") {
		t.Fatalf("two stdin secrets: %v: %s", err, out)
	}
	key, _ := credvault.ParseMasterKey(cliMasterKey)
	st, err := sqlitestore.Open(context.Background(), filepath.Join(dir, sqlitestore.DefaultFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := credvault.New(context.Background(), credvault.Config{Store: st, MasterKey: key, PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	r, _ := v.Lookup("s")
	if got, err := r.Secret(); err != nil || got != secret {
		t.Fatalf("stored secret = %q, %v", got, err)
	}
}

func TestDataDirDefaults(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"explicit", map[string]string{"GATEWAY_DATA_DIR": filepath.Join(base, "explicit"), "XDG_DATA_HOME": base, "HOME": base}, filepath.Join(base, "explicit")},
		{"xdg", map[string]string{"XDG_DATA_HOME": filepath.Join(base, "xdg"), "HOME": base}, filepath.Join(base, "xdg", "idn-gateway")},
		{"home", map[string]string{"HOME": filepath.Join(base, "home")}, filepath.Join(base, "home", ".local", "share", "idn-gateway")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.env["GATEWAY_MASTER_KEY"] = cliMasterKey
			var out, errb bytes.Buffer
			if code := run(context.Background(), []string{"list"}, func(k string) string { return c.env[k] }, &out, &errb); code != 0 {
				t.Fatalf("list: %d %s", code, errb.String())
			}
			if _, err := os.Stat(filepath.Join(c.want, sqlitestore.DefaultFileName)); err != nil {
				t.Fatalf("store in %s: %v", c.want, err)
			}
			if fi, err := os.Stat(c.want); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("data dir mode = %v, %v", fi.Mode(), err)
			}
		})
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"list"}, func(k string) string { return map[string]string{"GATEWAY_MASTER_KEY": cliMasterKey}[k] }, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "set GATEWAY_DATA_DIR") {
		t.Fatalf("no HOME and no GATEWAY_DATA_DIR: %d %s", code, errb.String())
	}
}

// Every command answers -h with its flags and the variables it reads, and
// --version with the version, without touching the store.
func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	names := []string{""}
	for n := range commands {
		names = append(names, n)
	}
	for _, name := range names {
		t.Run("command_"+name, func(t *testing.T) {
			for _, flag := range []string{"-h", "--help", "--version", "-version"} {
				args := []string{flag}
				if name != "" {
					args = []string{name, flag}
				}
				var out, errb bytes.Buffer
				code := run(context.Background(), args, func(string) string { return "" }, &out, &errb)
				if code != 0 || errb.Len() != 0 {
					t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
				}
				if strings.HasSuffix(flag, "version") {
					if !strings.HasPrefix(out.String(), "gateway ") || strings.Count(out.String(), "\n") != 1 {
						t.Errorf("%v: %q", args, out.String())
					}
					continue
				}
				if !strings.Contains(out.String(), "usage: gateway") || !strings.Contains(out.String(), "-version") {
					t.Errorf("%v lacks usage or flags:\n%s", args, out.String())
				}
				wantVars := map[string][]string{
					"": {"GATEWAY_ADDR", "LOG_FORMAT"}, "serve": {"GATEWAY_ADDR", "GATEWAY_MASTER_KEY", "LOG_LEVEL"},
					"list": {"GATEWAY_DATA_DIR", "GATEWAY_MASTER_KEY"}, "add": {"GATEWAY_MASTER_KEY"}, "keygen": nil,
				}[name]
				for _, v := range wantVars {
					if !strings.Contains(out.String(), "Environment:") || !strings.Contains(out.String(), v) {
						t.Errorf("%v does not list %s:\n%s", args, v, out.String())
					}
				}
			}
		})
	}
}

func Example_add() {
	dir, _ := os.MkdirTemp("", "gateway-example")
	defer os.RemoveAll(dir)
	env := map[string]string{"GATEWAY_DATA_DIR": dir, "GATEWAY_MASTER_KEY": cliMasterKey}
	getenv := func(k string) string { return env[k] }
	run(context.Background(), []string{"add", "--id", "openai", "--name", "OpenAI", "--base-url", "https://api.openai.com",
		"--auth-mode", "bearer", "--secret", "api_key=sk-example"}, getenv, os.Stdout, os.Stderr)
	run(context.Background(), []string{"delete", "--id", "openai"}, getenv, os.Stdout, os.Stderr)
	// Output:
	// ID      NAME    PROTOCOL  AUTH    STATUS  VERSION  SECRETS  LAST TEST  BASE URL
	// openai  OpenAI  http      bearer  active  1        api_key  -          https://api.openai.com
	// openai: deleted
}

// TestAdminTokenCommand: admin-token prints the data directory's token,
// making it (0600) on first use exactly as the gateway does at start, so
// that a local admin call is one command; GATEWAY_ADMIN_TOKEN wins.
func TestAdminTokenCommand(t *testing.T) {
	t.Parallel()
	c := newCLIRunner(t)
	delete(c.env, "GATEWAY_MASTER_KEY") // the token needs no master key
	first := c.run("admin-token")
	tok := strings.TrimSpace(first.stdout)
	if first.code != 0 || len(tok) < 16 {
		t.Fatalf("admin-token: %+v", first)
	}
	if got, err := gateway.AdminToken(c.env["GATEWAY_DATA_DIR"]); err != nil || got != tok {
		t.Fatalf("the gateway would use %q (%v), the command printed %q", got, err, tok)
	}
	info, err := os.Stat(filepath.Join(c.env["GATEWAY_DATA_DIR"], gateway.AdminTokenFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", info, err)
	}
	if again := c.run("admin-token"); strings.TrimSpace(again.stdout) != tok {
		t.Fatalf("second run printed another token: %+v", again)
	}
	c.env["GATEWAY_ADMIN_TOKEN"] = "from-the-environment-0123"
	if r := c.run("admin-token"); strings.TrimSpace(r.stdout) != "from-the-environment-0123" {
		t.Fatalf("GATEWAY_ADMIN_TOKEN not printed: %+v", r)
	}
}
