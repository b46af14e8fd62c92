package pairing_test

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/kit/testlog"
)

// gatewayProc is a gateway process of the real binary.
type gatewayProc struct {
	cmd  *exec.Cmd
	out  *testlog.Buffer
	done chan error
}

func startGatewayProc(t *testing.T, bin string, env []string, args ...string) *gatewayProc {
	t.Helper()
	p := &gatewayProc{cmd: exec.Command(bin, args...), out: &testlog.Buffer{}, done: make(chan error, 1)}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop ends the process with SIGTERM and waits for it.
func (p *gatewayProc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		t.Errorf("gateway %s did not stop on SIGTERM:\n%s", strings.Join(p.cmd.Args[1:], " "), p.out)
	}
}

// waitOffline waits until the owner's only gateway is listed offline.
func (cp *controlPlane) waitOffline(tok string) {
	cp.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, b := cp.call("GET", "/v1/gateways", tok, nil)
		var list struct{ Gateways []gatewayInfo }
		json.Unmarshal(b, &list)
		if len(list.Gateways) == 1 && !list.Gateways[0].Online {
			return
		}
		if time.Now().After(deadline) {
			cp.t.Fatalf("the gateway stays online: %s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeKeepsThePairingLink: once gateway pair has paired a data
// directory, gateway serve alone keeps the link to the owner's dashboard,
// as after a reboot with only the gateway's unit or container running,
// and the owner's RPCs reach its store. While serve keeps it, gateway
// pair refuses to open a second link; once the owner unpairs the gateway,
// serve stops keeping it and serves on.
func TestServeKeepsThePairingLink(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = "../../cmd/gateway" // its module's folder: builds with or without go.work
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the gateway: %v\n%s", err, out)
	}
	cp := startControlPlane(t, controlplane.ProviderSQLite)
	tok := cp.owner("alice")
	session, code := cp.startPairing(tok)

	key, _ := credvault.GenerateMasterKey()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	env := append(os.Environ(), "GATEWAY_DATA_DIR="+t.TempDir(), "GATEWAY_MASTER_KEY="+key.Encode(),
		"GATEWAY_ADMIN_ACCESS_MODE=loopback", "IDN_REGISTRY_URL="+cp.url(), "GATEWAY_ADDR="+addr)

	pair := startGatewayProc(t, bin, env, "pair", "--session-id", session, "--pair-code", code, "--namespace", "alice")
	gw := cp.waitOnline(tok)
	pair.stop(t)
	cp.waitOffline(tok)

	serve := startGatewayProc(t, bin, env, "serve")
	if got := cp.waitOnline(tok); got.ID != gw.ID {
		t.Fatalf("serve connected as gateway %s, paired as %s", got.ID, gw.ID)
	}
	if res, rpcErr := cp.rpc(tok, gw.ID, "connections.list", map[string]any{}); rpcErr != nil || !json.Valid(res) {
		t.Fatalf("connections.list through serve's link: %s %v\n%s", res, rpcErr, serve.out)
	}

	for _, args := range [][]string{{"pair"}, {"pair", "--daemon"}} {
		second := exec.Command(bin, args...)
		second.Env = env
		out, err := second.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "kept by another process") {
			t.Fatalf("gateway %s beside serve's link: %v %s", strings.Join(args, " "), err, out)
		}
	}
	if _, rpcErr := cp.rpc(tok, gw.ID, "connections.list", map[string]any{}); rpcErr != nil {
		t.Fatalf("the refused pair process disturbed serve's link: %v", rpcErr)
	}

	// The owner unpairs it: serve stops keeping the link, and serves on.
	if status, b := cp.call("DELETE", "/v1/gateways/"+gw.ID, tok, nil); status != http.StatusNoContent {
		t.Fatalf("unpair: %d %s", status, b)
	}
	if !serve.out.Await("pairing: link ended", 20*time.Second) {
		t.Fatalf("serve did not stop keeping the link of an unpaired gateway:\n%s", serve.out)
	}
	res, err := http.Get("http://" + addr + "/health/live")
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("serve after the unpairing: %v %v", res, err)
	}
	res.Body.Close()
	serve.stop(t)
	if !strings.Contains(serve.out.String(), "keeping the link to the owner's dashboard") {
		t.Errorf("serve's log does not say it keeps the link:\n%s", serve.out)
	}
}
