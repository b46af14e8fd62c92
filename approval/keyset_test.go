package approval_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/approval/approvaltest"
)

// TestKeysUpdate: the owner adds a passkey with an assertion of a pinned
// one; every forged, replayed, stale or misdirected update is refused.
func TestKeysUpdate(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	const rp, origin = "idn.example", "https://idn.example"
	old, added := approvaltest.NewPasskey(rp, origin), approvaltest.NewPasskey(rp, origin)
	other := approvaltest.NewPasskey(rp, origin) // another owner's passkey
	pinned := approvaltest.Keys("acme", old)
	pinned.Version = 3

	update := func(signer *approvaltest.Passkey, change func(*approval.KeysUpdate)) *approval.KeysUpdate {
		next := approvaltest.Keys("acme", old, added)
		next.Version = 4
		u := &approval.KeysUpdate{Keys: *next, Gateways: []string{"gw1"}, ExpiresAt: now.Add(5 * time.Minute)}
		if change != nil {
			change(u)
		}
		u.Assertion = signer.Assert(approval.KeysChallenge(u), approvaltest.Flags)
		return u
	}

	got, err := pinned.Apply(update(old, nil), "gw1", now)
	if err != nil || len(got.Keys) != 2 || got.Version != 4 {
		t.Fatalf("the owner's update: %+v, %v", got, err)
	}
	// The new set is what the next update must be signed by and newer than.
	removeOld := update(added, func(u *approval.KeysUpdate) {
		u.Keys = *approvaltest.Keys("acme", added)
		u.Keys.Version = 5
	})
	after, err := got.Apply(removeOld, "gw1", now)
	if err != nil || len(after.Keys) != 1 {
		t.Fatalf("removing the old passkey: %+v, %v", after, err)
	}
	if err := after.Verify(old.Assert([]byte("c"), approvaltest.Flags), []byte("c")); err == nil {
		t.Fatal("a removed passkey still verifies")
	}

	tampered := update(old, nil)
	tampered.Keys.Keys = append(tampered.Keys.Keys, other.Key())
	for _, tc := range []struct {
		name    string
		pinned  *approval.Keys
		u       *approval.KeysUpdate
		gateway string
	}{
		{"signed by another owner's passkey", pinned, update(other, nil), "gw1"},
		{"signed by the key being added only", pinned, update(added, nil), "gw1"},
		{"replayed after its signer was removed", after, update(old, nil), "gw1"},
		{"replayed old update", got, update(old, nil), "gw1"},
		{"another owner's key set", pinned, update(old, func(u *approval.KeysUpdate) { u.Keys.Namespace = "mallory" }), "gw1"},
		{"expired", pinned, update(old, func(u *approval.KeysUpdate) { u.ExpiresAt = now }), "gw1"},
		{"for another gateway", pinned, update(old, nil), "gw2"},
		{"key set changed after signing", pinned, tampered, "gw1"},
		{"origin changed", pinned, update(old, func(u *approval.KeysUpdate) { u.Keys.Origins = []string{"https://evil.example"} }), "gw1"},
		{"no key left", pinned, update(old, func(u *approval.KeysUpdate) { u.Keys.Keys = nil }), "gw1"},
		{"no assertion", pinned, func() *approval.KeysUpdate { u := update(old, nil); u.Assertion = nil; return u }(), "gw1"},
		{"an action approval's assertion", pinned, func() *approval.KeysUpdate {
			u := update(old, nil)
			u.Assertion = old.Assert(approval.Challenge(approval.Grant{ActionID: "a", Gateway: "gw1", Digest: "d", ExpiresAt: u.ExpiresAt, Uses: 1}), approvaltest.Flags)
			return u
		}(), "gw1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if k, err := tc.pinned.Apply(tc.u, tc.gateway, now); !errors.Is(err, approval.ErrKeysUpdate) {
				t.Fatalf("accepted %+v (%v)", k, err)
			}
		})
	}
}
