package evm

import (
	"encoding/hex"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/idnhq/idn/registry/evm/internal/idnregistry"
)

// FuzzRevertReason: revert data comes from the RPC node; decoding any of
// it yields a bounded, printable-by-construction reason and never panics.
func FuzzRevertReason(f *testing.F) {
	b := idnregistry.NewIDNRegistry()
	contract := b.GetABI()
	for _, seed := range []string{
		"",
		"08c379a0" + // Error("nope")
			"0000000000000000000000000000000000000000000000000000000000000020" +
			"0000000000000000000000000000000000000000000000000000000000000004" +
			"6e6f706500000000000000000000000000000000000000000000000000000000",
		"4e487b71" + "0000000000000000000000000000000000000000000000000000000000000011", // Panic(0x11)
		"366b2e5a" + "000000000000000000000000000000000000000000000000000000000000abcd", // NotRelayer(0xabcd)
		"5cc8c21e",                            // EmptyArgument()
		"366b2e5a" + "00",                     // NotRelayer, truncated
		"deadbeef" + strings.Repeat("ff", 64), // unknown selector
		"08c379a0" + // Error("") with no message
			"0000000000000000000000000000000000000000000000000000000000000020" +
			"0000000000000000000000000000000000000000000000000000000000000000",
	} {
		data, _ := hex.DecodeString(seed)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reason := revertReason(&contract, data)
		if reason == "" || len(reason) > maxReason+len("…") || !utf8.ValidString(reason) ||
			strings.ContainsFunc(reason, unicode.IsControl) {
			t.Fatalf("reason %q", reason)
		}
	})
}

// TestRevertReasons: the contract's custom errors and the standard
// Error(string) and Panic(uint256) decode to readable reasons.
func TestRevertReasons(t *testing.T) {
	b := idnregistry.NewIDNRegistry()
	contract := b.GetABI()
	notRelayer := contract.Errors["NotRelayer"].ID.Bytes()[:4]
	for _, tc := range []struct {
		name string
		data string
		want string
	}{
		{"no data", "", "without reason"},
		{"Error(string)", "08c379a0" +
			"0000000000000000000000000000000000000000000000000000000000000020" +
			"0000000000000000000000000000000000000000000000000000000000000004" +
			"6e6f706500000000000000000000000000000000000000000000000000000000", "nope"},
		{"custom error with its argument", hex.EncodeToString(notRelayer) +
			"000000000000000000000000000000000000000000000000000000000000abcd", "NotRelayer(0x000000000000000000000000000000000000ABcD)"},
		{"custom error cut short", hex.EncodeToString(notRelayer) + "00", "NotRelayer"},
		{"unknown selector", "deadbeef", "0xdeadbeef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, _ := hex.DecodeString(tc.data)
			if got := revertReason(&contract, data); got != tc.want {
				t.Fatalf("reason %q, want %q", got, tc.want)
			}
		})
	}
}
