package claimcache_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
)

// newControlPlane starts the claims API the tests read and submit to.
func newControlPlane(t testing.TB, claims ...claimcache.Claim) *claimcachetest.Server {
	cp := claimcachetest.NewServer()
	t.Cleanup(cp.Close)
	for _, c := range claims {
		cp.Approve(c)
	}
	return cp
}

// keysOf presents, for every service, the key cp gives it.
func keysOf(cp *claimcachetest.Server) func(string) (string, error) {
	return func(service string) (string, error) { return cp.APIKey(service), nil }
}

// githubKey presents, for every connection, the key of the service
// "github", which every submission in these tests is for.
func githubKey(cp *claimcachetest.Server) func(string) (string, error) {
	return func(string) (string, error) { return cp.APIKey("github"), nil }
}

// writeError answers as a control plane does, for servers that misbehave
// in ways a claimcachetest.Server does not.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg, "code": code, "request_id": "req_1"})
}

// agent is a test caller: a namespace and an Ed25519 key derived from a seed.
type agent struct {
	namespace string
	pub       ed25519.PublicKey
}

func newAgent(namespace string) agent {
	seed := sha256.Sum256([]byte(namespace))
	return agent{namespace, ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)}
}

func (a agent) header() string { return "ed25519:" + base64.StdEncoding.EncodeToString(a.pub) }

func (a agent) claim(id, service string) claimcache.Claim {
	return claimcache.Claim{
		ID: id, Namespace: a.namespace, PublicKey: a.header(), Service: service,
		ApprovedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
