package gatewaylink

import (
	"strings"
	"testing"

	"github.com/idnhq/idn/pairing/pairwire"
)

func TestPairingCode(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		c := newPairingCode()
		if len(c) != 8 || normalizePairingCode(c) != c {
			t.Fatalf("code %q", c)
		}
		seen[c] = true
	}
	if len(seen) < 199 {
		t.Fatalf("only %d distinct codes of 200", len(seen))
	}
	for in, want := range map[string]string{"abcd-efgh": "ABCDEFGH", "ilo0 1234": "11001234", "ABCDEFGU": "", "ABC": "", "ABCDEFGHJ": ""} {
		if got := normalizePairingCode(in); got != want {
			t.Errorf("normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

// A gateway's name is shown to its owner beside Unpair: a character that
// hides or reorders text is refused at pairing.
func TestPairingRefusesHiddenCharacters(t *testing.T) {
	p := pairwire.Pair{Name: "lap\u200Dtop", Version: "1", HPKEPublicKey: strings.Repeat("A", 43)}
	if err := checkPair(p); err == nil || !strings.Contains(err.Error(), "name") {
		t.Errorf("checkPair = %v", err)
	}
}
