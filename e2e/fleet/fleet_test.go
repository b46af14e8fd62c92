// Package fleet_test runs deploy/fleet/fleet.sh: two real gateways
// behind HAProxy, their nonces in a real redis-server, their connections
// in one real PostgreSQL. It checks what a fleet promises: no replay
// across replicas or restarts, a connection added on one replica served
// by the other within a second, an owner's approval granted through one
// replica spent once on the other, MCP sessions routed to their replica, no
// request lost to a rolling restart, and none lost to a crash but those
// in flight on the replica that died. Without redis-server, haproxy or
// PostgreSQL (IDN_TEST_POSTGRES_URL, or Debian's postgresql for the
// script to start) it skips, saying so; under CI=true it fails.
package fleet_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idnhq/idn/approval/approvaltest"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
)

const repo = "../.."

// fleet is a running deploy/fleet and what it serves.
type fleet struct {
	t       testing.TB
	dir     string
	env     []string
	lb      string // host:port of HAProxy: the authority agents sign
	replica map[string]string
	agent   *identity.Identity
	bin     string // the gateway binary
	up      string // the upstream's URL
	key     credvault.MasterKey
	desk    *approvaltest.Desk // the control plane's action routes

	mu     sync.Mutex
	orders map[string]int // order id → times the upstream took it
}

func need(t testing.TB, bins ...string) {
	t.Helper()
	for _, b := range bins {
		// Debian puts haproxy in /usr/sbin, outside a user's PATH; fleet.sh
		// looks there too.
		if _, err := exec.LookPath(b); err != nil && !executable(filepath.Join("/usr/sbin", b)) {
			missing(t, fmt.Sprintf("%s is not installed (apt-get install -y redis-server haproxy): the fleet test needs it", b))
		}
	}
}

func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true)")
	}
	t.Skip(msg)
}

// database returns a fresh schema of IDN_TEST_POSTGRES_URL, dropped at
// cleanup, as the URL that uses it. Without the variable it returns ""
// and fleet.sh starts a PostgreSQL of its own, which needs Debian's.
func database(t testing.TB) string {
	t.Helper()
	base := os.Getenv("IDN_TEST_POSTGRES_URL")
	if base == "" {
		if pg, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(pg) == 0 {
			missing(t, "no IDN_TEST_POSTGRES_URL and PostgreSQL is not installed (apt-get install -y postgresql): the fleet test needs one")
		}
		return ""
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	schema := "fleet_" + strings.ToLower(rand.Text())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		conn.Close(ctx)
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&0o111 != 0
}

func freePort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// startFleet starts the fleet in front of an upstream that takes delay
// an order.
func startFleet(t testing.TB, delay time.Duration) *fleet {
	need(t, "redis-server", "redis-cli", "haproxy")
	dbURL := database(t)
	f := &fleet{t: t, dir: t.TempDir(), orders: map[string]int{}}
	bin := filepath.Join(t.TempDir(), "gateway")
	f.bin = bin
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(repo, "cmd", "gateway")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the gateway: %v\n%s", err, out)
	}
	f.agent, _ = identity.New("alice")
	claims := claimcachetest.NewServer()
	t.Cleanup(claims.Close)
	claims.Approve(claimcache.Claim{Namespace: "alice", Service: "shop", PublicKey: f.agent.PublicKeyString()})
	f.desk = &approvaltest.Desk{}
	mux := http.NewServeMux()
	mux.Handle("/v1/gateways/actions", f.desk)
	mux.Handle("/v1/gateways/actions/", f.desk)
	mux.Handle("/", claims)
	cp := httptest.NewServer(mux)
	t.Cleanup(cp.Close)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var o struct{ ID string }
		json.NewDecoder(r.Body).Decode(&o)
		time.Sleep(delay)
		f.mu.Lock()
		f.orders[o.ID]++
		f.mu.Unlock()
	}))
	t.Cleanup(upstream.Close)
	f.up = upstream.URL
	key, _ := credvault.GenerateMasterKey()
	f.key = key
	ports := map[string]string{"LB": freePort(t), "GATEWAY_A": freePort(t), "GATEWAY_B": freePort(t), "REDIS": freePort(t), "STATS": freePort(t)}
	f.env = append(os.Environ(), "GATEWAY_BIN="+bin, "GATEWAY_MASTER_KEY="+key.Encode(), "IDN_REGISTRY_URL="+cp.URL,
		"IDN_SERVICE_API_KEY="+claims.APIKey("shop"), "GATEWAY_ADMIN_ACCESS_MODE=loopback", "LOG_LEVEL=warn")
	if dbURL != "" {
		f.env = append(f.env, "GATEWAY_DATABASE_URL="+dbURL)
	}
	for k, v := range ports {
		f.env = append(f.env, "FLEET_"+k+"_PORT="+v)
	}
	f.lb = "127.0.0.1:" + ports["LB"]
	f.replica = map[string]string{"a": "127.0.0.1:" + ports["GATEWAY_A"], "b": "127.0.0.1:" + ports["GATEWAY_B"]}
	t.Cleanup(func() {
		f.run("stop")
		if t.Failed() {
			for _, log := range []string{"a.log", "b.log", "haproxy.log", "redis.log", "pg/log"} {
				b, _ := os.ReadFile(filepath.Join(f.dir, log))
				t.Logf("%s:\n%s", log, b)
			}
		}
	})
	f.run("start")
	// One connection in the shared store, added by the command-line tool
	// with the fleet's database URL, serves on both replicas.
	db, err := os.ReadFile(filepath.Join(f.dir, "database.url"))
	if err != nil {
		t.Fatal(err)
	}
	add := exec.Command(bin, "add", "--id", "shop", "--base-url", upstream.URL, "--auth-mode", "bearer",
		"--auth-secret-key", "t", "--secret", "t=upstream-token")
	add.Env = append(f.env, "GATEWAY_DATA_DIR="+t.TempDir(), "GATEWAY_DATABASE_URL="+strings.TrimSpace(string(db)))
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("gateway add: %v\n%s", err, out)
	}
	for _, name := range []string{"a", "b"} {
		f.awaitServed(name, "shop", 10*time.Second)
	}
	return f
}

// awaitServed sends orders for connection conn to a replica until one is
// served, and returns how long that took.
func (f *fleet) awaitServed(name, conn string, within time.Duration) time.Duration {
	f.t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	for {
		status, code := send(client, f.replica[name], f.signFor(conn))
		if status == http.StatusOK {
			return time.Since(start)
		}
		if time.Since(start) > within {
			f.t.Fatalf("replica %s did not serve connection %s within %s: %d %s", name, conn, within, status, code)
		}
	}
}

// run runs fleet.sh with args after the fleet's folder.
func (f *fleet) run(cmd string, args ...string) {
	f.t.Helper()
	c := exec.Command("bash", append([]string{filepath.Join(repo, "deploy", "fleet", "fleet.sh"), cmd, f.dir}, args...)...)
	c.Env = f.env
	if out, err := c.CombinedOutput(); err != nil {
		f.t.Fatalf("fleet.sh %s %v: %v\n%s", cmd, args, err, out)
	}
}

// order is a signed POST, kept as bytes to send to any address.
type order struct {
	id     string
	path   string
	header http.Header
	body   []byte
}

var orderSeq atomic.Int64

// sign signs a new order of connection shop for the load balancer's
// authority.
func (f *fleet) sign() order { return f.signFor("shop") }

// signFor signs a new order of connection conn.
func (f *fleet) signFor(conn string) order {
	id := strconv.FormatInt(orderSeq.Add(1), 10)
	body := []byte(`{"id":"` + id + `"}`)
	path := "/proxy/" + conn + "/orders"
	req, _ := http.NewRequest("POST", "http://"+f.lb+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := f.agent.Sign(req, identity.SignOptions{}); err != nil {
		f.t.Error(err)
	}
	return order{id, path, req.Header, body}
}

// send sends o to addr; it returns the status (0: no answer) and code.
func send(client *http.Client, addr string, o order) (int, string) {
	req, _ := http.NewRequest("POST", "http://"+addr+o.path, bytes.NewReader(o.body))
	req.Header = o.header.Clone()
	res, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	var env struct{ Code string }
	b, _ := io.ReadAll(res.Body)
	json.Unmarshal(b, &env)
	return res.StatusCode, env.Code
}

func (f *fleet) taken(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.orders[id]
}

// result is one order of a load: when it was sent and answered, and how.
type result struct {
	id         string
	sent, done time.Time
	status     int
	code       string
}

// load sends fresh orders through the load balancer from workers
// goroutines until stop is closed, and returns every outcome.
func (f *fleet) load(workers int, stop <-chan struct{}) <-chan []result {
	out := make(chan []result, 1)
	go func() {
		var mu sync.Mutex
		var all []result
		var wg sync.WaitGroup
		client := &http.Client{Timeout: 30 * time.Second}
		for range workers {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					o := f.sign()
					r := result{id: o.id, sent: time.Now()}
					r.status, r.code = send(client, f.lb, o)
					r.done = time.Now()
					mu.Lock()
					all = append(all, r)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		out <- all
	}()
	return out
}

// awaitServed waits until the load has n more answers than now.
func (f *fleet) awaitOrders(n int) {
	f.t.Helper()
	f.mu.Lock()
	target := len(f.orders) + n
	f.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.mu.Lock()
		got := len(f.orders)
		f.mu.Unlock()
		if got >= target {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the upstream took %d orders, never %d", got, target)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFleet(t *testing.T) {
	// Orders take 10 ms upstream, so some are in flight when a replica dies.
	f := startFleet(t, 10*time.Millisecond)
	client := &http.Client{Timeout: 10 * time.Second}

	t.Run("replay to the other replica", func(t *testing.T) {
		o := f.sign()
		if status, code := send(client, f.replica["a"], o); status != 200 {
			t.Fatalf("order on a: %d %s", status, code)
		}
		if status, code := send(client, f.replica["b"], o); status != 403 || code != "AUTH_REPLAY_DETECTED" {
			t.Fatalf("replayed to b: %d %s, want 403 AUTH_REPLAY_DETECTED", status, code)
		}
		if status, code := send(client, f.lb, o); status != 403 || code != "AUTH_REPLAY_DETECTED" {
			t.Fatalf("replayed through HAProxy: %d %s, want 403 AUTH_REPLAY_DETECTED", status, code)
		}
		if n := f.taken(o.id); n != 1 {
			t.Fatalf("the upstream took the order %d times", n)
		}
	})

	t.Run("a connection added on a is served by b within a second", func(t *testing.T) {
		f.addConnection(t, "a", `{"id":"shop-eu","service":"shop","base_url":"`+f.up+`","auth_mode":"bearer","auth_secret_key":"t","secrets":{"t":"upstream-token"}}`)
		took := f.awaitServed("b", "shop-eu", time.Second)
		t.Logf("a connection added on a: served by b after %s", took)
		for range 2 { // round robin: once on each replica
			if status, code := send(client, f.lb, f.signFor("shop-eu")); status != 200 {
				t.Fatalf("through HAProxy: %d %s", status, code)
			}
		}
	})

	t.Run("an approval granted through a is spent on b, once", func(t *testing.T) {
		f.approvalAcrossReplicas(t)
	})

	t.Run("an MCP session goes to its replica", func(t *testing.T) {
		f.mcpSession(t)
	})

	t.Run("replay after restarting a replica", func(t *testing.T) {
		o := f.sign()
		if status, code := send(client, f.replica["a"], o); status != 200 {
			t.Fatalf("order on a: %d %s", status, code)
		}
		f.run("restart", "a")
		if status, code := send(client, f.replica["a"], o); status != 403 || code != "AUTH_REPLAY_DETECTED" {
			t.Fatalf("replayed to a restarted: %d %s, want 403 AUTH_REPLAY_DETECTED", status, code)
		}
		f.run("kill", "b")
		f.run("start-one", "b")
		if status, code := send(client, f.replica["b"], o); status != 403 || code != "AUTH_REPLAY_DETECTED" {
			t.Fatalf("replayed to b after a crash: %d %s, want 403 AUTH_REPLAY_DETECTED", status, code)
		}
	})

	t.Run("rolling restart under load loses nothing", func(t *testing.T) {
		stop := make(chan struct{})
		results := f.load(8, stop)
		f.awaitOrders(50)
		f.run("rolling")
		f.awaitOrders(50)
		close(stop)
		all := <-results
		var lost []result
		for _, r := range all {
			if r.status != 200 {
				lost = append(lost, r)
			}
		}
		t.Logf("rolling restart: %d orders, %d lost", len(all), len(lost))
		if len(lost) > 0 {
			t.Fatalf("%d of %d orders lost during a rolling restart, first: %+v", len(lost), len(all), lost[0])
		}
		f.checkOnce(t, all)
	})

	t.Run("a replica killed under load loses only what it held", func(t *testing.T) {
		stop := make(chan struct{})
		results := f.load(8, stop)
		f.awaitOrders(50)
		killed := f.kill("a")
		f.run("kill", "a") // reaps it
		f.awaitOrders(100)
		close(stop)
		all := <-results
		var lost, inFlight int
		for _, r := range all {
			held := r.sent.Before(killed) && r.done.After(killed)
			if held {
				inFlight++
			}
			if r.status != 200 {
				lost++
				if !held {
					t.Errorf("order %s, not in flight at the kill (sent %s after it), answered %d %s", r.id, r.sent.Sub(killed), r.status, r.code)
				} else {
					t.Logf("lost in flight: order %s answered %d %s; the upstream took it %d times", r.id, r.status, r.code, f.taken(r.id))
				}
			}
		}
		t.Logf("kill under load: %d orders, %d in flight when a died, %d lost", len(all), inFlight, lost)
		f.checkOnce(t, all)
		f.run("start-one", "a")
	})

	t.Run("Redis stopped under load: refused, then served again", func(t *testing.T) {
		stop := make(chan struct{})
		results := f.load(4, stop)
		f.awaitOrders(20)
		f.run("redis-stop")
		down := time.Now()
		deadline := time.Now().Add(10 * time.Second)
		for {
			status, code := send(client, f.lb, f.sign())
			if status == 503 {
				t.Logf("with Redis down: %d %s", status, code)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("with Redis down the fleet still answers %d %s", status, code)
			}
		}
		f.run("redis-start")
		up := time.Now()
		f.awaitOrders(20)
		close(stop)
		for _, r := range <-results {
			if r.status == 200 && r.sent.After(down) && r.done.Before(up) {
				t.Errorf("order %s served while Redis was down", r.id)
			}
		}
	})
}

// kill sends SIGKILL to a replica and returns when it did.
func (f *fleet) kill(name string) time.Time {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, name+".pid"))
	if err != nil {
		f.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		f.t.Fatal(err)
	}
	return time.Now()
}

// checkOnce fails when the upstream took an order more than once.
func (f *fleet) checkOnce(t *testing.T, all []result) {
	t.Helper()
	for _, r := range all {
		if n := f.taken(r.id); n > 1 {
			t.Errorf("the upstream took order %s %d times", r.id, n)
		}
	}
}

// addConnection creates a connection through a replica's admin API.
func (f *fleet) addConnection(t *testing.T, name, body string) {
	t.Helper()
	res, err := http.Post("http://"+f.replica[name]+"/api/admin/connections", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("adding a connection on %s: %d %s", name, res.StatusCode, b)
	}
}

// mcpSession opens an MCP session of a 2025 revision through HAProxy, to
// the MCP Go SDK's server behind connection tools. Its id names the
// replica that opened it; HAProxy sends each of its requests there, and
// the other replica, sent one directly, answers 421.
func (f *fleet) mcpSession(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	// The gateway may keep a stream open to it: cut it rather than wait.
	t.Cleanup(func() { up.CloseClientConnections(); up.Close() })
	f.addConnection(t, "a", `{"id":"tools","service":"shop","protocol":"mcp","base_url":"`+up.URL+`","mcp_endpoint":"/mcp","auth_mode":"bearer","auth_secret_key":"t","secrets":{"t":"upstream-token"}}`)
	signed := &http.Client{Transport: f.agent.Transport(nil, identity.SignOptions{})}
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, nil)
	// The session may open on b before b has the connection (404): it
	// has it within a second.
	var cs *mcp.ClientSession
	for start := time.Now(); cs == nil; {
		var err error
		cs, err = client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + f.lb + "/mcp/tools", HTTPClient: signed, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil && time.Since(start) > time.Second {
			t.Fatalf("opening a session through HAProxy: %v", err)
		}
	}
	defer cs.Close()
	owner, _, ok := strings.Cut(cs.ID(), ".")
	if !ok || f.replica[owner] == "" {
		t.Fatalf("session id %q names no replica of the fleet", cs.ID())
	}
	other := map[string]string{"a": "b", "b": "a"}[owner]
	t.Logf("session %s… opened on %s", cs.ID()[:6], owner)

	// Round robin alone would send every other request to the other
	// replica, and so fail half of these.
	for i := range 6 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": strconv.Itoa(i)}})
		if err != nil || res.IsError {
			t.Fatalf("call %d through HAProxy: %v %+v", i, err, res)
		}
	}

	// Signed for HAProxy's authority, sent to the other replica directly.
	req, _ := http.NewRequest("POST", "http://"+f.lb+"/mcp/tools", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
	if err := f.agent.Sign(req, identity.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	req.URL.Host = f.replica[other]
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var env struct{ Code, Replica string }
	b, _ := io.ReadAll(res.Body)
	json.Unmarshal(b, &env)
	if res.StatusCode != http.StatusMisdirectedRequest || env.Code != "MCP_SESSION_MISDIRECTED" || env.Replica != owner {
		t.Fatalf("the session sent to %s: %d %s, want 421 MCP_SESSION_MISDIRECTED naming %s", other, res.StatusCode, b, owner)
	}
}
