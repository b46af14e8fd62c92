// Package redistest runs real redis-server processes for tests: one
// server, a primary watched by a Sentinel, or a Cluster. A test that finds no
// redis-server skips, and fails under CI=true.
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is one redis-server process on a loopback port it keeps across
// Stop and Start.
type Server struct {
	t    testing.TB
	port int
	args []string
	dir  string
	cmd  *exec.Cmd
}

// Binary returns the path of redis-server, skipping t (failing it under
// CI=true) when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed (CI=true): apt-get install redis-server")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server); skipping")
	}
	return path
}

// Start runs redis-server with no persistence and the given extra
// arguments ("--maxmemory-policy", "allkeys-lru"), and stops it when
// the test ends.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	s := &Server{t: t, port: FreePort(t), args: args, dir: t.TempDir()}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's port.
func (s *Server) Port() int { return s.port }

// Start runs the server again after Stop, on the same port, with no
// data: what a restart without persistence leaves.
func (s *Server) Start() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir}, s.args...)
	s.cmd = run(s.t, Binary(s.t), args, "Ready to accept connections")
}

// Stop kills the server (SIGKILL: nothing is saved) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Sentinel is a primary and one Sentinel watching it as "mymaster".
type Sentinel struct {
	Primary *Server
	port    int
}

// StartSentinel runs a primary and a Sentinel (redis-server --sentinel).
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	primary := Start(t)
	port := FreePort(t)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 %d 1\n", port, primary.port)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := run(t, Binary(t), []string{conf, "--sentinel"}, "+monitor master mymaster")
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return &Sentinel{Primary: primary, port: port}
}

// URL is the Sentinel form of the deployment's URL.
func (s *Sentinel) URL() string {
	return fmt.Sprintf("redis://127.0.0.1:%d?master_name=mymaster", s.port)
}

// run starts a redis-server and returns once its log shows ready.
func run(t testing.TB, bin string, args []string, ready string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var log []string
		for sc.Scan() {
			if strings.Contains(sc.Text(), ready) {
				found <- true
				io.Copy(io.Discard, out)
				return
			}
			log = append(log, sc.Text())
		}
		t.Logf("redis-server %v ended before %q:\n%s", args, ready, strings.Join(log, "\n"))
		found <- false
	}()
	select {
	case ok := <-found:
		if !ok {
			cmd.Wait()
			t.Fatalf("redis-server did not start")
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("redis-server did not log %q within 20 s", ready)
	}
	return cmd
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Cluster is a Redis Cluster of three primaries, each holding a third of
// the slots.
type Cluster struct {
	Nodes []*Server
}

// StartCluster runs three cluster-enabled servers and joins them with
// redis-cli --cluster create; it returns once the cluster is ok.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed; skipping")
	}
	c := &Cluster{}
	args := []string{"--cluster", "create"}
	for range 3 {
		dir := t.TempDir()
		n := Start(t, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"))
		c.Nodes = append(c.Nodes, n)
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range c.Nodes {
		for {
			out, _ := exec.Command(cli, "-p", strconv.Itoa(n.port), "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cluster is not ok within 20 s:\n%s", out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c
}

// URL is the Cluster form of the deployment's URL: a seed and the others.
func (c *Cluster) URL() string {
	u := c.Nodes[0].URL() + "?addr=" + c.Nodes[1].Addr()
	for _, n := range c.Nodes[2:] {
		u += "&addr=" + n.Addr()
	}
	return u
}
