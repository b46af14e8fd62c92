package credvault

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseMasterKey(t *testing.T) {
	t.Parallel()
	good := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	if k, err := ParseMasterKey(" " + good + "\n"); err != nil || k.Encode() != good {
		t.Fatalf("ParseMasterKey(good) = %v", err)
	}
	bad := map[string]string{
		"empty":             "",
		"not_base64":        "this is not a key!",
		"short_31_bytes":    base64.StdEncoding.EncodeToString(make([]byte, 31)),
		"long_33_bytes":     base64.StdEncoding.EncodeToString(make([]byte, 33)),
		"hex_encoded":       strings.Repeat("ab", 32),
		"url_safe_alphabet": strings.Repeat("_-", 21) + "_w==",
		"unpadded":          strings.TrimRight(good, "="),
		"trailing_garbage":  good + "AAAA",
		"passphrase_as_key": "correct horse battery staple",
	}
	for name, in := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := ParseMasterKey(in)
			if !errors.Is(err, ErrInvalidMasterKey) {
				t.Fatalf("err = %v, want ErrInvalidMasterKey", err)
			}
			if !strings.Contains(err.Error(), "base64") || !strings.Contains(err.Error(), "32 random bytes") {
				t.Errorf("error does not say what a key is: %v", err)
			}
			if len(in) > 3 && strings.Contains(err.Error(), strings.TrimSpace(in)) {
				t.Errorf("error repeats the input: %v", err)
			}
		})
	}
}

func TestMasterKeyNeverPrints(t *testing.T) {
	t.Parallel()
	k, err := GenerateMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{k.String(), fmt.Sprintf("%v %+v %#v %s", k, k, k, k)} {
		if strings.Contains(s, k.Encode()) {
			t.Fatalf("key printed: %s", s)
		}
	}
}

func FuzzParseMasterKey(f *testing.F) {
	f.Add("")
	f.Add("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	f.Add("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8")
	f.Add("====")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseMasterKey(s)
		if err != nil {
			return
		}
		again, err := ParseMasterKey(k.Encode())
		if err != nil || again != k {
			t.Fatalf("round trip failed for accepted key")
		}
	})
}

// Derive gives one key per master key and purpose: the same in every
// process, another for another purpose or master key, never the master
// key itself.
func TestDeriveKeyPerPurpose(t *testing.T) {
	t.Parallel()
	k, _ := GenerateMasterKey()
	again, _ := ParseMasterKey(k.Encode())
	other, _ := GenerateMasterKey()
	a := k.Derive("mcp request state")
	if !bytes.Equal(a, again.Derive("mcp request state")) {
		t.Error("one master key derived two keys for one purpose")
	}
	for name, b := range map[string][]byte{
		"another purpose":    k.Derive("another purpose"),
		"another master key": other.Derive("mcp request state"),
		"the master key":     mustDecode(t, k.Encode()),
	} {
		if bytes.Equal(a, b) {
			t.Errorf("the derived key equals %s's", name)
		}
	}
	if len(a) != MasterKeySize {
		t.Errorf("derived %d bytes, want %d", len(a), MasterKeySize)
	}
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
