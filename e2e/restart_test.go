package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/openapicheck"
	"github.com/idnhq/idn/kit/testlog"
)

// binDir holds the built gateway; TestMain removes it.
var binDir string

// buildGateway compiles cmd/gateway once per test binary.
var buildGateway = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "e2e-gateway-bin")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "gateway")
	// Built in its own module's folder, so that it builds with or
	// without go.work (GOWORK=off).
	build := exec.Command("go", "build", "-o", bin, "./cmd/gateway")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build cmd/gateway: %w: %s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// gatewayProcess is the built binary serving at a fixed address.
type gatewayProcess struct {
	bin  string
	env  []string
	addr string
	cmd  *exec.Cmd
	logs testlog.Buffer
}

func (p *gatewayProcess) start(t *testing.T) {
	t.Helper()
	p.cmd = exec.Command(p.bin, "serve")
	p.cmd.Env = p.env
	p.cmd.Stderr = &p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

// kill sends SIGKILL and reaps the process.
func (p *gatewayProcess) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

// cli runs a gateway sub-command against the same store.
func (p *gatewayProcess) cli(args ...string) (string, error) {
	cmd := exec.Command(p.bin, args...)
	cmd.Env = p.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("gateway %s: %w: %s", args[0], err, errb.String())
	}
	return out.String(), nil
}

func isCode(a answer, code string) bool {
	e, err := a.envelope()
	return err == nil && e.Code == code
}

// TestGatewayKilledDuringLoad runs the built gateway binary under signed
// load while two writers change its store: the gateway's own admin API
// (rotations, in the gateway process) and the command-line tool (rotations
// and new connections, in separate processes). The gateway is SIGKILLed
// in the middle and started again on the same store and address.
//
// After the restart the store passes SQLite's integrity check, every write
// a writer saw succeed is there, gateway list works, and the gateway
// injects the connection's current secret. A request accepted before the
// kill is refused as a replay after the restart, though the killed
// process saved no nonces: the restarted one refuses every signature the
// dead one may have accepted (up to its replay horizon), which costs the
// loaders the requests they signed up to a lease (2 s) after the kill;
// they sign again (AUTH_REPLAY_DETECTED), as the SDKs do.
func TestGatewayKilledDuringLoad(t *testing.T) {
	bin, err := buildGateway()
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	var lastAuth atomic.Value
	upstream := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		lastAuth.Store(r.Header.Get("Authorization"))
		io.WriteString(rw, "ok")
	}))
	defer upstream.Close()

	key, err := credvault.GenerateMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	p := &gatewayProcess{bin: bin, addr: freeAddr(t)}
	p.env = append(os.Environ(), "GATEWAY_ADDR="+p.addr, "GATEWAY_DATA_DIR="+dataDir, "GATEWAY_MASTER_KEY="+key.Encode(),
		"GATEWAY_ADMIN_ACCESS_MODE=loopback", "IDN_REGISTRY_URL="+w.cp.url(), "IDN_SERVICE_API_KEY="+w.apiKey,
		"GATEWAY_CLAIMS_CACHE_TTL_SECONDS=2", "GATEWAY_CLAIMS_CACHE_REFRESH_SECONDS=1")
	if _, err := p.cli("add", "--id", "github", "--base-url", upstream.URL, "--auth-mode", "bearer", "--secret", "token=initial-secret"); err != nil {
		t.Fatal(err)
	}
	// Rotating through the admin API needs the admin token even from
	// loopback; the command-line tool prints the data directory's.
	adminToken, err := p.cli("admin-token")
	if err != nil {
		t.Fatal(err)
	}
	adminToken = strings.TrimSpace(adminToken)
	p.start(t)
	defer p.kill()
	base := "http://" + p.addr
	// The built binary is beyond Watch: its answers are checked client-side.
	client := openapicheck.WatchClient(t, &http.Client{Timeout: 5 * time.Second})
	get := func() (answer, error) {
		req, _ := http.NewRequest("GET", base+"/proxy/github/repos", nil)
		if err := w.agent.Sign(req, identity.SignOptions{}); err != nil {
			t.Fatal(err)
		}
		return do(client, req)
	}
	up := func() bool { a, err := get(); return err == nil && a.status == 200 }
	eventually(t, 15*time.Second, "the gateway to serve", up)

	// One request accepted before the kill, kept to replay later.
	captured, _ := http.NewRequest("GET", base+"/proxy/github/captured", nil)
	if err := w.agent.Sign(captured, identity.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	replay := func() answer {
		req, _ := http.NewRequest("GET", captured.URL.String(), nil)
		req.Header = captured.Header.Clone()
		a, err := do(client, req)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := replay(); a.status != 200 {
		t.Fatalf("captured request: %d %s", a.status, a.body)
	}
	replay().want(t, http.StatusForbidden, "AUTH_REPLAY_DETECTED")

	// Load and writers.
	var (
		stop                   = make(chan struct{})
		loadOK, loadDown       atomic.Int64
		load503, loadBad       atomic.Int64
		loadResign             atomic.Int64
		badAnswers             = make(chan string, 10)
		mu                     sync.Mutex
		written                = []string{"Bearer initial-secret"} // every secret a writer sent, as injected
		adminDone, cliRotDone  int
		cliAdded               []string
		writers, loaders       sync.WaitGroup
		enough                 = make(chan struct{})
		enoughOnce             sync.Once
		adminUnknown, cliFails int
		killed                 atomic.Bool
	)
	progress := func() {
		mu.Lock()
		defer mu.Unlock()
		if loadOK.Load() >= 200 && adminDone >= 5 && cliRotDone >= 3 && len(cliAdded) >= 3 {
			enoughOnce.Do(func() { close(enough) })
		}
	}
	for range 4 {
		loaders.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, err := get()
				switch {
				case err != nil:
					loadDown.Add(1) // killed: refused or cut mid-request
				case a.status == 200:
					loadOK.Add(1)
				case a.status == 503 && isCode(a, "AUTH_CLAIMS_UNAVAILABLE"):
					load503.Add(1) // restarted, claims not loaded yet
				case a.status == 403 && isCode(a, "AUTH_REPLAY_DETECTED") && killed.Load():
					loadResign.Add(1) // signed before the restarted gateway's horizon
				default:
					loadBad.Add(1)
					select {
					case badAnswers <- fmt.Sprintf("%d %s", a.status, a.body):
					default:
					}
				}
				progress()
			}
		})
	}
	writers.Go(func() { // the gateway's admin API, in the process that will be killed
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			secret := fmt.Sprintf("sk-admin-%d", i)
			mu.Lock()
			written = append(written, "Bearer "+secret)
			mu.Unlock()
			body := fmt.Sprintf(`{"secrets":{"token":%q},"reason":"e2e"}`, secret)
			req, _ := http.NewRequest("POST", base+"/api/admin/connections/github/rotate", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+adminToken)
			res, err := client.Do(req)
			mu.Lock()
			if err == nil && res.StatusCode == 200 {
				adminDone++
			} else {
				adminUnknown++ // the gateway is down, or died mid-write: committed or not
			}
			mu.Unlock()
			if err == nil {
				res.Body.Close()
			} else {
				time.Sleep(20 * time.Millisecond) // down; retry at a bounded pace
			}
			progress()
		}
	})
	writers.Go(func() { // the command-line tool, separate processes
		for i := 0; i < 200; i++ {
			select {
			case <-stop:
				return
			default:
			}
			secret, id := fmt.Sprintf("sk-cli-%d", i), fmt.Sprintf("cli-%d", i)
			mu.Lock()
			written = append(written, "Bearer "+secret)
			mu.Unlock()
			_, rerr := p.cli("rotate", "--id", "github", "--secret", "token="+secret, "--reason", "e2e")
			_, aerr := p.cli("add", "--id", id, "--base-url", upstream.URL, "--auth-mode", "bearer", "--secret", "token=cli-secret")
			mu.Lock()
			if rerr == nil {
				cliRotDone++
			} else {
				cliFails++
			}
			if aerr == nil {
				cliAdded = append(cliAdded, id)
			} else {
				cliFails++
			}
			mu.Unlock()
			progress()
		}
	})

	select {
	case <-enough:
	case <-time.After(20 * time.Second):
		t.Fatal("load and writers made too little progress in 20 s")
	}
	killed.Store(true)
	p.kill()
	killedAt := time.Now()
	okAtKill := loadOK.Load()
	p.start(t)
	eventually(t, 15*time.Second, "the restarted gateway to serve", up)
	recovered := time.Since(killedAt)
	close(stop)
	loaders.Wait()
	writers.Wait()
	if n := loadBad.Load(); n > 0 {
		t.Fatalf("%d load answers were neither 200, 503 AUTH_CLAIMS_UNAVAILABLE nor (after the kill) 403 AUTH_REPLAY_DETECTED, e.g. %s", n, <-badAnswers)
	}
	if cliFails > 0 {
		t.Fatalf("%d command-line writes failed while the gateway was killed and restarted", cliFails)
	}

	// The store: SQLite's own check, then every confirmed write.
	db, err := sql.Open("sqlite", filepath.Join(dataDir, sqlitestore.DefaultFileName))
	if err != nil {
		t.Fatal(err)
	}
	var integrity string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check: %q %v", integrity, err)
	}
	db.Close()
	out, err := p.cli("list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var conns []credvault.Connection
	if err := json.Unmarshal([]byte(out), &conns); err != nil {
		t.Fatalf("gateway list --json: %v\n%s", err, out)
	}
	ids := map[string]bool{}
	var version int64
	for _, c := range conns {
		ids[c.ID] = true
		if c.ID == "github" {
			version = c.SecretVersion
		}
	}
	for _, id := range append(cliAdded, "github") {
		if !ids[id] {
			t.Errorf("connection %q, whose creation succeeded, is missing after the restart", id)
		}
	}
	confirmed := int64(1 + adminDone + cliRotDone)
	if version < confirmed || version > confirmed+int64(adminUnknown) {
		t.Errorf("secret_version %d; %d confirmed versions and %d admin rotations of unknown outcome", version, confirmed, adminUnknown)
	}
	// The gateway injects a secret some writer wrote, then a new one.
	if got, _ := lastAuth.Load().(string); !slices.Contains(written, got) {
		t.Errorf("upstream saw %q, which no writer wrote", got)
	}
	if _, err := p.cli("rotate", "--id", "github", "--secret", "token=after-restart"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the rotated secret to be injected", func() bool {
		return up() && lastAuth.Load() == "Bearer after-restart"
	})

	// The killed process saved no nonces, yet the captured request is
	// still a replay.
	replay().want(t, http.StatusForbidden, "AUTH_REPLAY_DETECTED")

	logs := p.logs.String()
	for _, s := range written[1:] {
		if strings.Contains(logs, `"`+strings.TrimPrefix(s, "Bearer ")+`"`) {
			t.Fatalf("gateway logs contain the secret %q:\n%s", s, logs)
		}
	}
	t.Logf("killed after %d proxied requests (%d admin rotations, %d CLI rotations, %d CLI adds confirmed; %d admin rotations cut or refused); "+
		"serving again %v after SIGKILL; load totals: %d ok, %d 503 while claims reloaded, %d refused or cut while down, %d signed before the horizon and signed again; "+
		"integrity_check ok, %d connections listed, secret_version %d",
		okAtKill, adminDone, cliRotDone, len(cliAdded), adminUnknown, recovered.Round(time.Millisecond),
		loadOK.Load(), load503.Load(), loadDown.Load(), loadResign.Load(), len(conns), version)
}
