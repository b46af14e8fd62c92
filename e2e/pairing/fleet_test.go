package pairing_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/pairing"
)

// TestFleetPairsOnce pairs a fleet of two replicas on one shared store
// through the first, then lets the second keep the link. The control
// plane knows one gateway, and the second reconnects without a new
// pairing. An owner's change through its link is served by the first.
func TestFleetPairsOnce(t *testing.T) {
	const secret = "sk-live-fleet-5e4d3c2b1a"
	cp := startControlPlane(t, controlplane.ProviderSQLite)
	tok := cp.owner("alice")
	if status, b := cp.call("POST", "/v1/services", tok, map[string]any{"name": "Weather", "service_endpoint": "https://api.weather.example"}); status != http.StatusCreated {
		t.Fatalf("create the service: %d %s", status, b)
	}
	key, _ := credvault.GenerateMasterKey()
	st := &credvault.MemoryStore{}
	replica := func() *gateway.Gateway {
		gw, err := gateway.New(gateway.Config{DataDir: t.TempDir(), MasterKey: key, ControlPlaneURL: cp.url(), Store: st,
			InsecureForgetNoncesOnRestart: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gw.Close() })
		return gw
	}
	link := func(gw *gateway.Gateway) *pairing.Client {
		c, err := pairing.New(pairing.Config{ControlPlaneURL: cp.url(), Identity: gw.Identity(), Admin: gw.Admin(), Files: gw.PairingFiles(),
			MasterKey: key, Name: "fleet", Version: "0.9.0", MaxBackoff: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := replica(), replica()

	session, code := cp.startPairing(tok)
	ctx, stopA := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	go func() {
		doneA <- link(a).Run(ctx, &pairing.Pairing{SessionID: session, Code: code, Namespace: "alice"})
	}()
	first := cp.waitOnline(tok)
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("a's link: %v", err)
	}
	// Until the control plane sees a's link closed, it still lists the
	// gateway online and would route the change below to a dead link.
	cp.waitOffline(tok)

	// b reads the pairing a made, at its next look at the store.
	within(t, time.Second, "replica b reading as paired", func() bool {
		_, paired, _, _ := pairing.StatusOf(b.PairingFiles())
		return paired
	})
	cb := link(b)
	ctx, stopB := context.WithCancel(context.Background())
	defer stopB()
	go func() { _ = cb.Run(ctx, nil) }()
	again := cp.waitOnline(tok)
	if again.ID != first.ID || again.Fingerprint != first.Fingerprint {
		t.Fatalf("b connected as %+v, a paired as %+v", again, first)
	}
	res, e := cp.rpc(tok, again.ID, "connections.create", map[string]any{"id": "weather", "name": "Weather", "base_url": "https://api.weather.example",
		"auth_mode": "bearer", "auth_secret_key": "token", "sealed_secrets": seal(t, again, map[string]string{"token": secret})})
	if e != nil {
		t.Fatalf("create through b's link: %s %v", res, e)
	}
	within(t, time.Second, "a change through b's link to reach a", func() bool {
		r, ok := a.Vault().Lookup("weather")
		if !ok {
			return false
		}
		s, _ := r.Secret()
		return s == secret
	})
}

// within waits up to d for cond; a Vault has no hook that reports a
// reload.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
