package credvault

import (
	"bytes"
	"testing"
)

func TestMasterKeySeal(t *testing.T) {
	t.Parallel()
	k, _ := GenerateMasterKey()
	other, _ := GenerateMasterKey()
	sealed, err := k.Seal("hpke-key", []byte("private"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("private")) {
		t.Fatal("plaintext visible in the sealed value")
	}
	if got, err := k.Open("hpke-key", sealed); err != nil || string(got) != "private" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	for name, open := range map[string]func() ([]byte, error){
		"other key":     func() ([]byte, error) { return other.Open("hpke-key", sealed) },
		"other purpose": func() ([]byte, error) { return k.Open("identity", sealed) },
		"tampered": func() ([]byte, error) {
			b := bytes.Clone(sealed)
			b[len(b)-1] ^= 1
			return k.Open("hpke-key", b)
		},
	} {
		if _, err := open(); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}
