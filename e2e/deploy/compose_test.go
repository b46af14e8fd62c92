// Package deploy_test runs the services of compose.yaml as plain processes,
// with the commands and environment the file gives them, and passes a
// signed request through them. Containers cannot run on the machines CI
// uses (no registry to pull the PostgreSQL image from, and no cgroup
// support for running one); .ci/deploy builds and inspects the image
// instead, and hands this test the binaries it put in it
// (IDN_DEPLOY_ROOTFS, deploy/rootfs.sh's output). Without it the test
// builds them with deploy/rootfs.sh.
//
// What differs from a container run, and nothing else: the addresses (a
// service name and a container port become a free loopback port, the
// postgres service the test's PostgreSQL server, with a role and a
// database of the test's own in DATABASE_URL), the folders (a volume, and
// a folder the image declares as one, becomes a temporary folder, and
// /usr/local/bin the binaries' folder), and the users (every process runs
// as the test's). The image's ENV is read from the Dockerfile's last
// stage; .ci/deploy checks the built image has it.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
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
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/testlog"
)

// repo is the repository's root, from this package's folder.
const repo = "../.."

// service is one service of compose.yaml, as docker compose reads it.
type service struct {
	Image       string            `json:"image"`
	Entrypoint  []string          `json:"entrypoint"`
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	Volumes     []string          `json:"volumes"`
	Ports       []string          `json:"ports"`
	User        string            `json:"user"`
	DependsOn   map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
}

func TestComposeServices(t *testing.T) {
	services := loadCompose(t)
	env := dotenv(t)
	pgBase := os.Getenv("IDN_TEST_POSTGRES_URL")
	if pgBase == "" {
		skipOrFail(t, "IDN_TEST_POSTGRES_URL is unset: the compose services need PostgreSQL")
	}
	rootfs := os.Getenv("IDN_DEPLOY_ROOTFS")
	if rootfs == "" {
		rootfs = t.TempDir()
		build := exec.Command("sh", "deploy/rootfs.sh", rootfs)
		build.Dir = repo
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("deploy/rootfs.sh: %v\n%s", err, out)
		}
	}
	image := imageConfig(t)

	// Every service runs the image the Dockerfile builds, as its user.
	for name, s := range services {
		if name == "postgres" {
			continue
		}
		if s.Image != "idn:local" {
			t.Errorf("%s runs image %q, not the one the Dockerfile builds", name, s.Image)
		}
		if s.User != "" && s.User != image.user {
			t.Errorf("%s runs as %q, the image's user is %q (who owns its data folders)", name, s.User, image.user)
		}
	}

	// Addresses: each published port gets a free loopback port.
	hosts := map[string]string{} // "service:port" → "127.0.0.1:free"
	listen := map[string]map[string]string{}
	for name, s := range services {
		listen[name] = map[string]string{}
		for _, p := range s.Ports {
			parts := strings.Split(p, ":")
			port := parts[len(parts)-1]
			addr := freeAddr(t)
			hosts[name+":"+port] = addr
			listen[name]["0.0.0.0:"+port] = addr
		}
	}
	db := newDatabase(t, pgBase, env["POSTGRES_PASSWORD"])
	hosts["postgres:5432"] = db.hostPort

	// Folders: a named volume is one folder for every service mounting it.
	volumes := map[string]string{}
	volume := func(name string) string {
		if volumes[name] == "" {
			volumes[name] = filepath.Join(t.TempDir(), name)
			if err := os.Mkdir(volumes[name], 0o700); err != nil {
				t.Fatal(err)
			}
		}
		return volumes[name]
	}

	procs := map[string]*process{}
	commands := map[string]func() *process{}
	for name, s := range services {
		if name == "postgres" {
			continue
		}
		paths := map[string]string{"/usr/local/bin/": filepath.Join(rootfs, "usr", "local", "bin") + "/"}
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			paths[parts[1]] = volume(parts[0])
		}
		for _, v := range image.volumes {
			if paths[v] == "" {
				paths[v] = volume(name + "-anonymous" + strings.ReplaceAll(v, "/", "-"))
			}
		}
		local := func(v string) string {
			v = interpolate(t, v, env)
			for from, to := range hosts {
				v = strings.ReplaceAll(v, "@"+from+"/", "@"+to+"/")
				v = strings.ReplaceAll(v, "://"+from, "://"+to)
			}
			for from, to := range listen[name] {
				if v == from {
					v = to
				}
			}
			for from, to := range paths {
				if v == from || strings.HasPrefix(v, strings.TrimSuffix(from, "/")+"/") {
					v = to + strings.TrimPrefix(v, strings.TrimSuffix(from, "/"))
				}
			}
			return db.rewrite(v)
		}
		var argv []string
		for _, a := range slices.Concat(s.Entrypoint, s.Command) {
			argv = append(argv, local(a))
		}
		vars := []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range image.env {
			vars = append(vars, k+"="+local(v))
		}
		for k, v := range s.Environment {
			vars = append(vars, k+"="+local(v))
		}
		commands[name] = func() *process { return start(t, name, argv, vars) }
	}

	// In depends_on order: a service waits for what it depends on to have
	// exited with 0 (service_completed_successfully) or to answer on its
	// published port.
	var order []string
	var visit func(string)
	visit = func(name string) {
		if name == "postgres" || slices.Contains(order, name) {
			return
		}
		for dep := range services[name].DependsOn {
			visit(dep)
		}
		order = append(order, name)
	}
	for _, name := range sortedKeys(services) {
		visit(name)
	}
	for _, name := range order {
		for dep, d := range services[name].DependsOn {
			if dep == "postgres" {
				continue
			}
			switch d.Condition {
			case "service_completed_successfully":
				procs[dep].wait(t, 0)
			case "service_started", "":
			default:
				t.Fatalf("%s depends on %s %s, which this test does not know", name, dep, d.Condition)
			}
		}
		procs[name] = commands[name]()
		for _, addr := range listen[name] {
			procs[name].waitLive(t, "http://"+addr+"/health/live")
		}
	}
	gwURL, cpURL := "http://"+hosts["gateway:38100"], "http://"+hosts["controlplane:8787"]
	if gwURL == "http://" || cpURL == "http://" {
		t.Fatalf("compose.yaml no longer publishes the gateway's 38100 and the control plane's 8787: %v", hosts)
	}

	// compose up again: provision finds its key file and mints nothing.
	keyFile := filepath.Join(volumes["provision"], "service-api-key")
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatalf("provision left no key in its volume: %v", err)
	}
	commands["provision"]().wait(t, 0)
	if again, _ := os.ReadFile(keyFile); !bytes.Equal(again, key) {
		t.Fatal("a second provision replaced the key the gateway reads")
	}

	// The gateway's data went to its volume, writable by its user.
	if _, err := os.Stat(filepath.Join(volumes["gatewaydata"], "gateway.db")); err != nil {
		t.Fatalf("the gateway's store is not in its volume: %v", err)
	}

	// A connection for the provisioned service, through the admin API with
	// the token compose gives the gateway (access mode token).
	const secret = "sk-upstream-5e1f0a9c7b"
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"forecast":"sunny"}`)
	}))
	t.Cleanup(upstream.Close)
	slug := interpolate(t, "${IDN_SERVICE_SLUG:-local-gateway}", env)
	body, _ := json.Marshal(map[string]any{"id": "weather", "name": "Weather", "service": slug, "base_url": upstream.URL,
		"auth_mode": "bearer", "auth_secret_key": "token", "secrets": map[string]string{"token": secret}})
	req, _ := http.NewRequest("POST", gwURL+"/api/admin/connections", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+env["GATEWAY_ADMIN_TOKEN"])
	if status, b := do(t, req); status != http.StatusCreated {
		t.Fatalf("create the connection: %d %s", status, b)
	}

	// The agent's owner, signed in through the database the control plane
	// uses (compose runs it in production: there is no test seed, and a
	// passkey ceremony is not what this test is about).
	owner := ownerSession(t, db.url, env["JWT_SECRET"], "deploy-agent")
	agent, err := identity.New("deploy-agent")
	if err != nil {
		t.Fatal(err)
	}
	signed := func() (int, []byte) {
		req, _ := http.NewRequest("GET", gwURL+"/proxy/weather/forecast", nil)
		if err := agent.Sign(req, identity.SignOptions{}); err != nil {
			t.Fatal(err)
		}
		return do(t, req)
	}

	// Unapproved: the gateway files a claim with the provisioned key.
	var refusal struct {
		Code    errcode.Code `json:"code"`
		ClaimID string       `json:"claim_id"`
	}
	var status int
	var b []byte
	eventually(t, procs, "the gateway to file a claim", func() bool {
		status, b = signed()
		json.Unmarshal(b, &refusal)
		return status == http.StatusForbidden && refusal.Code == errcode.AuthClaimRequired && refusal.ClaimID != ""
	}, func() string { return fmt.Sprintf("%d %s", status, b) })

	req, _ = http.NewRequest("POST", cpURL+"/v1/claims/"+refusal.ClaimID+"/approve", nil)
	req.Header.Set("Origin", interpolate(t, "${CONTROLPLANE_PUBLIC_URL:-http://localhost:8787}", env))
	req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: owner})
	if status, b := do(t, req); status != http.StatusOK {
		t.Fatalf("approve claim %s: %d %s", refusal.ClaimID, status, b)
	}
	eventually(t, procs, "the approved request to go through", func() bool {
		status, b = signed()
		return status == http.StatusOK && strings.Contains(string(b), "sunny")
	}, func() string { return fmt.Sprintf("%d %s", status, b) })

	for _, name := range order {
		procs[name].stop(t)
		for _, leak := range []string{secret, env["GATEWAY_MASTER_KEY"], env["GATEWAY_ADMIN_TOKEN"], env["JWT_SECRET"], strings.TrimSpace(string(key))} {
			if strings.Contains(procs[name].out.String(), leak) {
				t.Errorf("%s logged a secret", name)
			}
		}
	}
}

func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why + " (CI=true)")
	}
	t.Skip(why)
}

// loadCompose reads compose.yaml with PyYAML (Debian's python3-yaml): the
// repository adds no YAML dependency for one test.
func loadCompose(t *testing.T) map[string]service {
	t.Helper()
	cmd := exec.Command("python3", "-c", "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)")
	f, err := os.Open(filepath.Join(repo, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdin = f
	out, err := cmd.Output()
	if err != nil {
		skipOrFail(t, fmt.Sprintf("python3 with PyYAML (python3-yaml) reads compose.yaml here, and failed: %v", err))
	}
	var file struct {
		Services map[string]json.RawMessage `json:"services"`
	}
	if err := json.Unmarshal(out, &file); err != nil {
		t.Fatal(err)
	}
	services := map[string]service{}
	for name, raw := range file.Services {
		var s service
		// A list environment (["K=V"]) or a string command would not
		// decode: the file uses maps and lists, and this test says so.
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("service %s: %v (this test reads environment as a map and entrypoint and command as lists)", name, err)
		}
		services[name] = s
	}
	return services
}

// dotenv is deploy/compose.env.example with every secret made by the
// command its comment gives (openssl rand -hex N or -base64 N).
func dotenv(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "compose.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	recipe := regexp.MustCompile(`^#\s*openssl rand -(hex|base64) (\d+)`)
	var how []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if m := recipe.FindStringSubmatch(line); m != nil {
			how = m
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		if v == "" {
			if how == nil {
				t.Fatalf("deploy/compose.env.example: %s is empty and no comment says how to make it", k)
			}
			var n int
			fmt.Sscan(how[2], &n)
			raw := randomBytes(n)
			if v = hex.EncodeToString(raw); how[1] == "base64" {
				v = base64.StdEncoding.EncodeToString(raw)
			}
		}
		env[k], how = v, nil
	}
	return env
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

var variable = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// interpolate substitutes variables as docker compose does: $$, $NAME,
// ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error} and
// ${NAME?error}. A required variable that .env lacks fails the test.
func interpolate(t *testing.T, s string, env map[string]string) string {
	t.Helper()
	return variable.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		g := variable.FindStringSubmatch(m)
		name := g[1] + g[4]
		v, set := env[name]
		switch g[2] {
		case ":-":
			if v == "" {
				return g[3]
			}
		case "-":
			if !set {
				return g[3]
			}
		case ":?", "?":
			if !set || (g[2] == ":?" && v == "") {
				t.Fatalf("compose.yaml requires %s (%s), which deploy/compose.env.example lacks", name, g[3])
			}
		}
		return v
	})
}

// image is what the Dockerfile's last stage sets.
type image struct {
	user    string
	env     map[string]string
	volumes []string
}

// imageConfig reads USER, ENV and VOLUME of the Dockerfile's last stage.
func imageConfig(t *testing.T) image {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var img image
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		instr, rest, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch instr {
		case "FROM":
			img = image{env: map[string]string{}}
		case "USER":
			img.user = rest
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("Dockerfile: ENV %s: this test reads ENV NAME=value only", rest)
				}
				img.env[k] = v
			}
		case "VOLUME":
			if err := json.Unmarshal([]byte(rest), &img.volumes); err != nil {
				t.Fatalf("Dockerfile: VOLUME %s: this test reads the JSON form only", rest)
			}
		}
	}
	return img
}

// database is the test's stand-in for the postgres service: a role and a
// database of its own on IDN_TEST_POSTGRES_URL's server, dropped at the
// end.
type database struct {
	name, hostPort, url string
}

func newDatabase(t *testing.T, base, password string) *database {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	d := &database{name: "idn_deploy_" + hex.EncodeToString(b[:]), hostPort: u.Host}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	if _, err := admin.Exec(fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, d.name, strings.ReplaceAll(password, "'", "''"))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(`DROP ROLE ` + d.name) })
	if _, err := admin.Exec(fmt.Sprintf(`CREATE DATABASE %s OWNER %s`, d.name, d.name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(`DROP DATABASE ` + d.name + ` WITH (FORCE)`) })
	own := *u
	own.User, own.Path, own.RawQuery = url.UserPassword(d.name, password), "/"+d.name, "sslmode=disable"
	d.url = own.String()
	return d
}

// rewrite points a PostgreSQL URL of the compose file (user idn, database
// idn, host already mapped) at the test's role and database.
func (d *database) rewrite(v string) string {
	if !strings.HasPrefix(v, "postgres://") {
		return v
	}
	u, err := url.Parse(v)
	if err != nil || u.Host != d.hostPort {
		return v
	}
	pw, _ := u.User.Password()
	u.User, u.Path = url.UserPassword(d.name, pw), "/"+d.name
	return u.String()
}

// ownerSession makes namespace ns and a session of its owner, through
// the control plane's database and session key.
func ownerSession(t *testing.T, dbURL, jwtSecret, ns string) string {
	t.Helper()
	ctx := context.Background()
	store, err := controlplane.Open(ctx, controlplane.StoreConfig{Provider: controlplane.ProviderPostgres, DatabaseURL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv, err := controlplane.New(controlplane.Config{Store: store, JWTSecret: []byte(jwtSecret)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := srv.Provision(ctx, ns, controlplane.ServiceSpec{}); err != nil {
		t.Fatal(err)
	}
	tok, _, err := srv.IssueSession(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// process is a service's running command.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *testlog.Buffer
	done chan struct{}
}

func start(t *testing.T, name string, argv, env []string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(argv[0], argv[1:]...), out: &testlog.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.out)
		}
	})
	return p
}

// wait waits for the process to exit with code.
func (p *process) wait(t *testing.T, code int) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not exit:\n%s", p.name, p.out)
	}
	if got := p.cmd.ProcessState.ExitCode(); got != code {
		t.Fatalf("%s exited %d, want %d:\n%s", p.name, got, code, p.out)
	}
}

// waitLive waits until url answers 200, failing as soon as the process
// exits.
func (p *process) waitLive(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before %s answered:\n%s", p.name, p.cmd.ProcessState, url, p.out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s did not answer 200 within a minute:\n%s", p.name, url, p.out)
		}
	}
}

// stop ends the process with SIGTERM, as docker compose down does, and
// expects a clean exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop on SIGTERM:\n%s", p.name, p.out)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("%s exited %d on SIGTERM:\n%s", p.name, code, p.out)
	}
}

// eventually polls cond for up to a minute (the gateway polls the claims
// feed every 10 seconds by default), failing at once if a service exits.
func eventually(t *testing.T, procs map[string]*process, what string, cond func() bool, last func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		for _, p := range procs {
			select {
			case <-p.done:
				if p.name != "provision" {
					t.Fatalf("%s exited while waiting for %s:\n%s", p.name, what, p.out)
				}
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last: %s", what, last())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
