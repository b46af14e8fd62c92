package rounds_test

import (
	"testing"

	"github.com/idnhq/idn/mcpproxy/internal/rounds"
)

// A sealed state opens for its owner alone, unaltered, with the key
// that sealed it: rows named for the attack.
func TestSealedStateOpensForItsOwnerAlone(t *testing.T) {
	t.Parallel()
	s := rounds.NewSealer(nil)
	sealed := s.Seal("alice\x00confirm", "server-state.with.dots")
	if got, ok := s.Open("alice\x00confirm", sealed); !ok || got != "server-state.with.dots" {
		t.Fatalf("Open = %q, %v; want the server's state", got, ok)
	}
	for _, tt := range []struct{ name, owner, sealed string }{
		{"another caller's state", "bob\x00confirm", sealed},
		{"a state of another tool", "alice\x00other", sealed},
		{"an altered server state", "alice\x00confirm", sealed + "x"},
		{"a state sealed by another process", "alice\x00confirm", rounds.NewSealer(nil).Seal("alice\x00confirm", "server-state.with.dots")},
		{"an unsealed state", "alice\x00confirm", "server-state"},
		{"a forged seal", "alice\x00confirm", "idn1.AAAAAAAAAAAAAAAAAAAAAAAA.server-state"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := s.Open(tt.owner, tt.sealed); ok {
				t.Errorf("Open = %q, want refused", got)
			}
		})
	}
}

// Sealers given one key, as the replicas of a fleet are, open each
// other's states; a sealer with another key does not.
func TestSealedStateOpensOnEveryReplicaOfOneKey(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	sealed := rounds.NewSealer(key).Seal("alice\x00confirm", "server-state")
	if got, ok := rounds.NewSealer(key).Open("alice\x00confirm", sealed); !ok || got != "server-state" {
		t.Fatalf("another replica's Open = %q, %v; want the server's state", got, ok)
	}
	other := []byte("fedcba9876543210fedcba9876543210")
	if got, ok := rounds.NewSealer(other).Open("alice\x00confirm", sealed); ok {
		t.Fatalf("a gateway of another key opened %q", got)
	}
}
