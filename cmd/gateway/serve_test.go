package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/kit/testlog"
)

// linkedVersion is set at link time into the binary buildGateway builds.
const linkedVersion = "v9.9.9-test"

// buildGateway compiles this command once per test binary.
var buildGateway = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "gateway-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "gateway")
	out, err := exec.Command("go", "build", "-ldflags", "-X github.com/idnhq/idn/kit/buildinfo.version="+linkedVersion,
		"-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return bin, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A slow in-flight request completes after SIGTERM, new connections are
// refused meanwhile, and the process reports a successful drain.
func TestServeGracefulShutdown(t *testing.T) {
	t.Parallel()
	bin, err := buildGateway()
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "slow answer")
	}))
	defer upstream.Close()

	dataDir := t.TempDir()
	key, _ := credvault.GenerateMasterKey()
	env := map[string]string{"GATEWAY_DATA_DIR": dataDir, "GATEWAY_MASTER_KEY": key.Encode()}
	getenv := func(k string) string { return env[k] }
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"add", "--id", "slow", "--base-url", upstream.URL, "--auth-mode", "bearer",
		"--auth-secret-key", "t", "--secret", "t=upstream-token"}, getenv, &out, &errb); code != 0 {
		t.Fatalf("gateway add: %d %s", code, errb.String())
	}

	addr := freeAddr(t)
	cmd := exec.Command(bin) // no sub-command: serve is the default
	cmd.Env = append(os.Environ(),
		"GATEWAY_ADDR="+addr, "GATEWAY_DATA_DIR="+dataDir, "GATEWAY_MASTER_KEY="+key.Encode(),
		"GATEWAY_ADMIN_ACCESS_MODE=loopback", "GATEWAY_ALLOW_UNSIGNED_CONNECTIONS=slow",
		"IDN_REGISTRY_URL=http://127.0.0.1:1", "GATEWAY_SHUTDOWN_TIMEOUT_SECONDS=10")
	var stderr testlog.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor(t, "the gateway to listen", func() bool {
		resp, err := http.Get("http://" + addr + "/health/live")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})

	// --version and /health report the version set at link time.
	if out, err := exec.Command(bin, "--version").Output(); err != nil || string(out) != "gateway "+linkedVersion+"\n" {
		t.Errorf("gateway --version = %q, %v", out, err)
	}
	if resp, err := http.Get("http://" + addr + "/health"); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"version":"`+linkedVersion+`"`) {
			t.Errorf("/health = %s, want version %s", b, linkedVersion)
		}
	}

	type result struct {
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/proxy/slow/work")
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- result{string(b), err}
	}()
	<-started
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "new connections to be refused", func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	close(release)
	res := <-done
	if res.err != nil || res.body != "slow answer" {
		t.Fatalf("in-flight request: %q, %v", res.body, res.err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gateway exit: %v\n%s", err, stderr.String())
	}
	logs := stderr.String()
	if !strings.Contains(logs, `"drain":"success"`) || !strings.Contains(logs, "UNSAFE") {
		t.Errorf("logs lack the drain outcome or the unsigned warning:\n%s", logs)
	}
	if strings.Contains(logs, "upstream-token") || strings.Contains(logs, key.Encode()) {
		t.Errorf("logs leak a secret:\n%s", logs)
	}
}

// Binding beyond loopback is allowed and logged as a warning at start;
// LOG_FORMAT=text gives text lines.
func TestServeWarnsBeyondLoopback(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		addr string
		warn bool
	}{
		{"127.0.0.1:0", false},
		{"0.0.0.0:0", true},
	} {
		t.Run(tt.addr, func(t *testing.T) {
			key, _ := credvault.GenerateMasterKey()
			env := map[string]string{"GATEWAY_ADDR": tt.addr, "GATEWAY_DATA_DIR": t.TempDir(), "GATEWAY_MASTER_KEY": key.Encode(),
				"GATEWAY_ADMIN_ACCESS_MODE": "loopback", "IDN_REGISTRY_URL": "http://127.0.0.1:1", "LOG_FORMAT": "text"}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stderr testlog.Buffer
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, io.Discard, &stderr)
			}()
			if !stderr.Await("gateway listening", 10*time.Second) {
				t.Fatalf("the gateway never said it listens:\n%s", stderr.String())
			}
			cancel()
			if code := <-done; code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			logs := stderr.String()
			if warned := strings.Contains(logs, "level=WARN msg=\"gateway listens beyond loopback"); warned != tt.warn {
				t.Errorf("warned = %v, want %v:\n%s", warned, tt.warn, logs)
			}
		})
	}
}

// With an OTLP endpoint set, the start-up log says tracing is on and where
// spans go, without the endpoint's user information or query.
func TestServeLogsTracingOn(t *testing.T) {
	t.Parallel()
	key, _ := credvault.GenerateMasterKey()
	env := map[string]string{"GATEWAY_ADDR": "127.0.0.1:0", "GATEWAY_DATA_DIR": t.TempDir(), "GATEWAY_MASTER_KEY": key.Encode(),
		"GATEWAY_ADMIN_ACCESS_MODE": "loopback", "IDN_REGISTRY_URL": "http://127.0.0.1:1", "LOG_FORMAT": "text",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:s3cret@127.0.0.1:1?token=s3cret"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, io.Discard, &stderr)
	}()
	if !stderr.Await("gateway listening", 10*time.Second) {
		t.Fatalf("the gateway never said it listens:\n%s", stderr.String())
	}
	cancel()
	<-done
	logs := stderr.String()
	if !strings.Contains(logs, "tracing on") || !strings.Contains(logs, "endpoint=http://127.0.0.1:1/v1/traces") || strings.Contains(logs, "s3cret") {
		t.Errorf("the log does not say where spans go, or shows a secret:\n%s", logs)
	}
}

// Configuration problems are listed one per line, with exit status 2.
func TestServeConfigurationProblems(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GATEWAY_DATA_DIR": t.TempDir(), "GATEWAY_ADDR": "127.0.0.1:0", "LOG_LEVEL": "loud", "GATEWAY_NONCE_MEMORY_BYTES": "0",
		"GATEWAY_ADMIN_TOKEN": "short"}
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, io.Discard, &stderr)
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, stderr.String())
	}
	for _, want := range []string{"configuration problems:", "\n  - GATEWAY_MASTER_KEY", "\n  - LOG_LEVEL", "\n  - GATEWAY_NONCE_MEMORY_BYTES", "\n  - IDN_REGISTRY_URL", "\n  - GATEWAY_ADMIN_TOKEN"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// On SIGTERM the gateway fails /health/ready at once and goes on serving
// for GATEWAY_SHUTDOWN_DELAY_SECONDS, so a load balancer moves away
// first; then it finishes the request in flight and exits cleanly.
func TestServeDrainsNotReadyFirst(t *testing.T) {
	t.Parallel()
	bin, err := buildGateway()
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/work/slow" {
			close(started)
			<-release
		}
		_, _ = io.WriteString(w, "answer")
	}))
	defer upstream.Close()
	var releasing sync.Once
	unblock := func() { releasing.Do(func() { close(release) }) }
	defer unblock() // before upstream.Close, which waits for the handler
	dataDir := t.TempDir()
	key, _ := credvault.GenerateMasterKey()
	env := map[string]string{"GATEWAY_DATA_DIR": dataDir, "GATEWAY_MASTER_KEY": key.Encode()}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"add", "--id", "api", "--base-url", upstream.URL, "--auth-mode", "bearer",
		"--auth-secret-key", "t", "--secret", "t=upstream-token"}, func(k string) string { return env[k] }, &out, &errb); code != 0 {
		t.Fatalf("gateway add: %d %s", code, errb.String())
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "GATEWAY_ADDR="+addr, "GATEWAY_DATA_DIR="+dataDir, "GATEWAY_MASTER_KEY="+key.Encode(),
		"GATEWAY_ADMIN_ACCESS_MODE=loopback", "GATEWAY_ALLOW_UNSIGNED_PROXY=true", "IDN_REGISTRY_URL=http://127.0.0.1:1",
		"GATEWAY_SHUTDOWN_DELAY_SECONDS=2", "GATEWAY_SHUTDOWN_TIMEOUT_SECONDS=10")
	var stderr testlog.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, "the gateway to be ready", func() bool { code, _ := get("/health/ready"); return code == 200 })

	// A load balancer's pooled connection, idle when the drain starts.
	pooled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pooled.Close()
	pooledReader := bufio.NewReader(pooled)
	onPooled := func() (*http.Response, error) {
		if _, err := io.WriteString(pooled, "GET /proxy/api/work/fast HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(pooledReader, nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	if resp, err := onPooled(); err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("a request on the pooled connection: %v %v", resp, err)
	}

	slow := make(chan string, 1)
	go func() { _, body := get("/proxy/api/work/slow"); slow <- body }()
	<-started
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !stderr.Await("gateway draining", 10*time.Second) {
		t.Fatalf("no drain logged:\n%s", stderr.String())
	}
	if code, body := get("/health/ready"); code != 503 || !strings.Contains(body, `"drain":`) {
		t.Fatalf("readiness while draining: %d %s, want 503 naming drain", code, body)
	}
	// The pooled connection was not cut under a request on its way: the
	// next one is served, and its answer closes the connection.
	if resp, err := onPooled(); err != nil || resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("a request on the pooled connection while draining: %v %v, want 200 closing it", resp, err)
	}
	// Within the delay a request that a load balancer still sends is served.
	if code, body := get("/proxy/api/work/fast"); code != 200 || body != "answer" {
		t.Fatalf("a request during the delay: %d %s", code, body)
	}
	unblock()
	if body := <-slow; body != "answer" {
		t.Fatalf("the in-flight request: %q", body)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gateway exit: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), `"drain":"success"`) {
		t.Errorf("no successful drain logged:\n%s", stderr.String())
	}
}
