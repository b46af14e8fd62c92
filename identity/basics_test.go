package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestValidNamespace(t *testing.T) {
	for _, ns := range []string{"abc", "vector-alice", "A1-b2", strings.Repeat("a", 64)} {
		if err := ValidNamespace(ns); err != nil {
			t.Errorf("ValidNamespace(%q) = %v, want nil", ns, err)
		}
	}
	for name, ns := range map[string]string{
		"too short":       "ab",
		"too long":        strings.Repeat("a", 65),
		"leading hyphen":  "-abc",
		"trailing hyphen": "abc-",
		"underscore":      "a_bc",
		"path traversal":  "../etc",
		"slash":           "a/bc",
		"space":           "a bc",
		"unicode":         "abç",
		"empty":           "",
	} {
		if err := ValidNamespace(ns); !errors.Is(err, ErrInvalidNamespace) {
			t.Errorf("%s: ValidNamespace(%q) = %v, want ErrInvalidNamespace", name, ns, err)
		}
	}
}

func TestParseDID(t *testing.T) {
	good := map[string]ParsedDID{
		"did:idn:acme":                      {Namespace: "acme"},
		"did:idn:acme:github":               {Namespace: "acme", Service: "github"},
		"did:idn:acme:github#bot#user-42":   {Namespace: "acme", Service: "github", Agent: "bot", Subject: "user-42"},
		"did:idn:acme#ed25519-6c5e2486caa3": {Namespace: "acme", Agent: "ed25519-6c5e2486caa3"},
		"did:idn:acme:github#bot":           {Namespace: "acme", Service: "github", Agent: "bot"},
	}
	for s, want := range good {
		got, err := ParseDID(s)
		if err != nil {
			t.Errorf("ParseDID(%q): %v", s, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ParseDID(%q) mismatch (-want +got):\n%s", s, diff)
		}
		if got.String() != s {
			t.Errorf("ParseDID(%q).String() = %q", s, got.String())
		}
	}
	for _, s := range []string{
		"", "did:idn:", "did:web:acme", "did:idn:ab", "did:idn:acme:", "did:idn:acme#",
		"did:idn:acme##x", "did:idn:acme:gh#a#", "did:idn:acme:g h", "did:idn:acme:a:b", "did:idn:-acme",
	} {
		if _, err := ParseDID(s); !errors.Is(err, ErrInvalidDID) {
			t.Errorf("ParseDID(%q) = %v, want ErrInvalidDID", s, err)
		}
	}
}

func FuzzParseDID(f *testing.F) {
	for _, s := range []string{"did:idn:acme", "did:idn:acme:svc#a#b", "did:idn:acme#x", "did:idn::#", "did:idn:a-b-c:%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDID(s)
		if err != nil {
			return
		}
		again, err := ParseDID(d.String())
		if err != nil || again != d {
			t.Fatalf("ParseDID(%q) = %+v does not round-trip: %+v, %v", s, d, again, err)
		}
	})
}

func TestKeyEncodings(t *testing.T) {
	v := loadVectors(t)
	id := vectorIdentity(t, v)
	if got, want := id.KeyID(), "did:idn:vector-alice#ed25519-6c5e2486caa323fb"; got != want {
		t.Errorf("KeyID = %q, want %q", got, want)
	}
	if got := FormatPublicKey(id.PublicKey); got != v.Record["publicKey"] {
		t.Errorf("FormatPublicKey = %q, want %q", got, v.Record["publicKey"])
	}
	mb := Multibase(id.PublicKey)
	if !strings.HasPrefix(mb, "z6Mk") {
		t.Errorf("Multibase = %q, want z6Mk… prefix", mb)
	}
	for _, s := range []string{FormatPublicKey(id.PublicKey), mb} {
		pub, err := ParsePublicKey(s)
		if err != nil || !pub.Equal(id.PublicKey) {
			t.Errorf("ParsePublicKey(%q) = %x, %v", s, pub, err)
		}
	}
	for _, bad := range []string{"", "ed25519:", "ed25519:AAAA", "rsa:" + FormatPublicKey(id.PublicKey)[8:],
		"ed25519:" + strings.Repeat("A", 43) + "*", "zzz", "z" + strings.Repeat("1", 40)} {
		if _, err := ParsePublicKey(bad); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParsePublicKey(%q) = %v, want ErrInvalidKey", bad, err)
		}
	}
}

func TestCertificate(t *testing.T) {
	v := loadVectors(t)
	id := vectorIdentity(t, v)
	// The certificate we issue for the vector key is byte-identical to the
	// vector's header.
	if got, want := id.CertificateHeader(), v.Vectors[0].Headers["idn-agent-cert"]; got != want {
		t.Fatalf("certificate header\n got %s\nwant %s", got, want)
	}
	c, err := DecodeCertificateHeader(id.CertificateHeader() + "==")
	if err != nil {
		t.Fatalf("padded header: %v", err)
	}
	if _, err := c.VerifyProof(); err != nil {
		t.Fatalf("VerifyProof: %v", err)
	}
	wantText := "idn-certificate-v1\nnamespace:vector-alice\ndid:did:idn:vector-alice\n" +
		"key-id:did:idn:vector-alice#ed25519-6c5e2486caa323fb\n" +
		"public-key:ed25519:UPzVfDDTwn7El9khES0+2S0a3ZYgsMC7tDO6I7DdCuk=\n" +
		"issued-at:2023-11-14T00:00:00Z\nexpires-at:"
	if got := c.CanonicalText(); got != wantText {
		t.Errorf("CanonicalText:\n%s\nwant\n%s", got, wantText)
	}

	tamper := func(f func(*Certificate)) error {
		cc := *c
		f(&cc)
		_, err := cc.VerifyProof()
		return err
	}
	rows := map[string]func(*Certificate){
		"namespace swapped":   func(c *Certificate) { c.Namespace, c.DID = "mallory", "did:idn:mallory" },
		"did mismatch":        func(c *Certificate) { c.DID = "did:idn:other" },
		"keyid outside did":   func(c *Certificate) { c.KeyID = "did:idn:other#k" },
		"expiry added":        func(c *Certificate) { s := "2099-01-01T00:00:00Z"; c.ExpiresAt = &s },
		"proof alg":           func(c *Certificate) { c.Proof.Alg = "rsa" },
		"proof garbage":       func(c *Certificate) { c.Proof.Sig = "!!!" },
		"version 2":           func(c *Certificate) { c.Version = 2 },
		"multibase key form":  func(c *Certificate) { c.PublicKey = Multibase(id.PublicKey) },
		"issued at rewritten": func(c *Certificate) { c.IssuedAt = "2020-01-01T00:00:00Z" },
	}
	for name, f := range rows {
		if err := tamper(f); !errors.Is(err, ErrInvalidCertificate) {
			t.Errorf("%s: VerifyProof = %v, want ErrInvalidCertificate", name, err)
		}
	}
	for _, bad := range []string{"", "***", "e30", strings.Repeat("A", maxCertificateHeader+1)} {
		if _, err := DecodeCertificateHeader(bad); !errors.Is(err, ErrInvalidCertificate) {
			t.Errorf("DecodeCertificateHeader(%q) = %v", bad, err)
		}
	}
}

func TestCertificateTimes(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	now := time.Unix(1700000000, 0)
	c, err := IssueCertificate("timely", key, now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckTimes(now, 30*time.Second); err != nil {
		t.Errorf("valid window: %v", err)
	}
	if err := c.CheckTimes(now.Add(time.Hour), 30*time.Second); !errors.Is(err, ErrInvalidCertificate) {
		t.Errorf("at expiry: %v, want ErrInvalidCertificate", err)
	}
	if err := c.CheckTimes(now.Add(-31*time.Second), 30*time.Second); !errors.Is(err, ErrInvalidCertificate) {
		t.Errorf("issued in the future: %v, want ErrInvalidCertificate", err)
	}
}

func FuzzDecodeCertificateHeader(f *testing.F) {
	v := loadVectors(f)
	f.Add(v.Vectors[0].Headers["idn-agent-cert"])
	f.Add("eyJ2ZXJzaW9uIjoxfQ")
	f.Add("")
	f.Add("e30=")
	f.Fuzz(func(t *testing.T, h string) {
		c, err := DecodeCertificateHeader(h)
		if err != nil {
			if !errors.Is(err, ErrInvalidCertificate) {
				t.Fatalf("error %v does not wrap ErrInvalidCertificate", err)
			}
			return
		}
		_, _ = c.VerifyProof()
		_ = c.CheckTimes(time.Now(), time.Minute)
	})
}

func TestRecordRoundTrip(t *testing.T) {
	v := loadVectors(t)
	raw, err := json.Marshal(v.Record)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ParseRecord(raw)
	if err != nil {
		t.Fatalf("ParseRecord(vector): %v", err)
	}
	home := t.TempDir()
	if err := id.Save(home); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		filepath.Join(home, "identities", "vector-alice"): 0o700 | os.ModeDir,
		Path(home, "vector-alice"):                        0o600,
	} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s mode = %v, want %v", path, st.Mode(), want)
		}
	}
	back, err := Load(home, "vector-alice")
	if err != nil {
		t.Fatal(err)
	}
	saved, _ := os.ReadFile(Path(home, "vector-alice"))
	var got, want map[string]any
	_ = json.Unmarshal(saved, &got)
	_ = json.Unmarshal(raw, &want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("saved record differs from the vector (unknown fields must survive) (-want +got):\n%s", diff)
	}
	if back.KeyID() != id.KeyID() || back.CertificateHeader() != id.CertificateHeader() {
		t.Errorf("loaded identity differs")
	}
	names, err := List(home)
	if err != nil || len(names) != 1 || names[0] != "vector-alice" {
		t.Errorf("List = %v, %v", names, err)
	}
	if _, err := Load(home, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load(missing) = %v, want ErrNotFound", err)
	}
	if _, err := Load(home, "../x"); !errors.Is(err, ErrInvalidNamespace) {
		t.Errorf("Load(traversal) = %v, want ErrInvalidNamespace", err)
	}
}

func TestParseRecordRejects(t *testing.T) {
	v := loadVectors(t)
	other, _ := New("vector-alice")
	rows := map[string]func(m map[string]any){
		"version 2":          func(m map[string]any) { m["version"] = 2 },
		"bad namespace":      func(m map[string]any) { m["namespace"] = "a" },
		"seed too short":     func(m map[string]any) { m["privateKey"] = "AAAA" },
		"key pair mismatch":  func(m map[string]any) { m["publicKey"] = other.PublicKeyString() },
		"no certificate":     func(m map[string]any) { delete(m, "certificate") },
		"foreign cert":       func(m map[string]any) { m["certificate"] = other.Certificate },
		"did mismatch":       func(m map[string]any) { m["did"] = "did:idn:other" },
		"bad createdAt":      func(m map[string]any) { m["createdAt"] = "yesterday" },
		"namespace mismatch": func(m map[string]any) { m["namespace"] = "vector-bob" },
	}
	for name, mutate := range rows {
		m := map[string]any{}
		b, _ := json.Marshal(v.Record)
		_ = json.Unmarshal(b, &m)
		mutate(m)
		b, _ = json.Marshal(m)
		if _, err := ParseRecord(b); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: ParseRecord = %v, want ErrInvalidRecord", name, err)
		}
	}
	if _, err := ParseRecord([]byte("[]")); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("array: %v", err)
	}
}

func FuzzParseRecord(f *testing.F) {
	v := loadVectors(f)
	b, _ := json.Marshal(v.Record)
	f.Add(b)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := ParseRecord(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidRecord) && !errors.Is(err, ErrInvalidCertificate) {
				t.Fatalf("unexpected error type: %v", err)
			}
			return
		}
		out, err := id.MarshalRecord()
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseRecord(out)
		if err != nil || !bytes.Equal(again.PublicKey, id.PublicKey) {
			t.Fatalf("record does not round-trip: %v", err)
		}
	})
}

// Rename keeps the key (so approvals of it stand) and the record keeps the
// name across a save and load; a named identity's requests verify with
// the name on the caller.
func TestRenameKeepsKeyAndSurvivesSave(t *testing.T) {
	home := t.TempDir()
	id, err := NewNamed("rename-ns", "First name")
	if err != nil {
		t.Fatal(err)
	}
	key := id.PublicKeyString()
	if err := id.Rename("Second name", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := id.Rename("bad\u202ename", time.Now()); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("Rename to an invisible character = %v", err)
	}
	if id.Name() != "Second name" {
		t.Fatalf("a refused rename changed the name to %q", id.Name())
	}
	if err := id.Save(home); err != nil {
		t.Fatal(err)
	}
	back, err := Load(home, "rename-ns")
	if err != nil {
		t.Fatal(err)
	}
	if back.Name() != "Second name" || back.PublicKeyString() != key || back.CertificateHeader() != id.CertificateHeader() {
		t.Fatalf("loaded name %q key %s", back.Name(), back.PublicKeyString())
	}
	if err := back.Rename("", time.Now()); err != nil || back.Name() != "" {
		t.Fatalf("removing the name: %v, %q", err, back.Name())
	}
}
