package gatewaylink

import (
	"encoding/json"
	"testing"

	"github.com/idnhq/idn/pairing/pairwire"
)

// FuzzGatewayMessages feeds what a gateway or an owner sends before any
// check: the pairing message, its code and an RPC's id. Nothing panics,
// and a normalized code is always eight Crockford characters.
func FuzzGatewayMessages(f *testing.F) {
	for _, seed := range []string{
		`{"session_id":"gps_1","pair_code":"abcd-efgh","name":"laptop","version":"1.0","hpke_public_key":"` +
			"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" + `"}`,
		`{"name":"\u0000","hpke_public_key":"===="}`, `[]`, `1`, `"ilo0 1234"`, `{"id":1.5e300}`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p pairwire.Pair
		if json.Unmarshal(b, &p) == nil {
			_ = checkPair(p)
			if c := normalizePairingCode(p.PairCode); c != "" && (len(c) != 8 || normalizePairingCode(c) != c) {
				t.Fatalf("normalizePairingCode(%q) = %q", p.PairCode, c)
			}
		}
		if c := normalizePairingCode(string(b)); c != "" && normalizePairingCode(c) != c {
			t.Fatalf("normalizePairingCode(%q) = %q is not stable", b, c)
		}
		_ = validRPCID(b)
		var m relayMsg
		_ = json.Unmarshal(b, &m)
	})
}
