package credvault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/errcode"
)

func testKey(t testing.TB) MasterKey {
	t.Helper()
	k, err := ParseMasterKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func openTestVault(t testing.TB, st Store, key MasterKey, poll time.Duration) *Vault {
	t.Helper()
	v, err := New(context.Background(), Config{Store: st, MasterKey: key, PollInterval: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func newTestVault(t testing.TB) *Vault {
	return openTestVault(t, &MemoryStore{}, testKey(t), -1)
}

func httpConn(id string) *Connection {
	return &Connection{ID: id, Name: "GitHub", BaseURL: "https://api.github.com", AuthMode: AuthBearer, AuthSecretKey: "token"}
}

func mustSecret(t *testing.T, v *Vault, id string) string {
	t.Helper()
	r, ok := v.Lookup(id)
	if !ok {
		t.Fatalf("connection %q not in snapshot", id)
	}
	s, err := r.Secret()
	if err != nil {
		t.Fatalf("Secret(%q): %v", id, err)
	}
	return s
}

func TestVaultCreateResolvesVariables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newTestVault(t)
	c, err := v.Create(ctx, httpConn("github"), map[string]string{"token": "ghp_{{GH_TOKEN}}", "other": "other-secret"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != StatusActive || c.Protocol != ProtocolHTTP || c.AuthPrefix != "Bearer " || c.SecretVersion != 1 ||
		!slices.Equal(c.CredentialKeys, []string{"other", "token"}) || c.CreatedAt.IsZero() {
		t.Fatalf("created connection = %+v", c)
	}
	r, _ := v.Lookup("github")
	if _, err := r.Secret(); !errors.Is(err, ErrCredentialUnresolved) {
		t.Fatalf("before the variable exists: err = %v, want ErrCredentialUnresolved", err)
	}
	if _, created, err := v.PutVariable(ctx, "GH_TOKEN", "abc123", "alice"); err != nil || !created {
		t.Fatalf("PutVariable = %v, %v", created, err)
	}
	if got := mustSecret(t, v, "github"); got != "ghp_abc123" {
		t.Fatalf("secret = %q", got)
	}
	vr, created, err := v.PutVariable(ctx, "GH_TOKEN", "def456", "")
	if err != nil || created || vr.Version != 2 || vr.CreatedBySubject != "alice" {
		t.Fatalf("update variable = %+v, %v, %v", vr, created, err)
	}
	if got := mustSecret(t, v, "github"); got != "ghp_def456" {
		t.Fatalf("secret after variable update = %q", got)
	}
	if _, err := v.Create(ctx, httpConn("github"), map[string]string{"token": "xx-secret"}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate create err = %v", err)
	}
}

func TestVaultWrongMasterKeyAtOpen(t *testing.T) {
	t.Parallel()
	st := &MemoryStore{}
	v := openTestVault(t, st, testKey(t), -1)
	if _, err := v.Create(context.Background(), httpConn("a"), map[string]string{"token": "s3cr3t-value"}); err != nil {
		t.Fatal(err)
	}
	other, _ := GenerateMasterKey()
	if _, err := New(context.Background(), Config{Store: st, MasterKey: other, PollInterval: -1}); !errors.Is(err, ErrWrongMasterKey) {
		t.Fatalf("New with another key: err = %v, want ErrWrongMasterKey", err)
	}
	if _, err := New(context.Background(), Config{Store: st, PollInterval: -1}); !errors.Is(err, ErrInvalidMasterKey) {
		t.Fatalf("New with zero key: err = %v, want ErrInvalidMasterKey", err)
	}
}

func TestVaultRotate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newTestVault(t)
	c := httpConn("stripe")
	c.RotationIntervalDays = 30
	if _, err := v.Create(ctx, c, map[string]string{"token": "old-secret", "extra": "extra-secret"}); err != nil {
		t.Fatal(err)
	}
	newVal := "new-secret"
	got, err := v.Rotate(ctx, "stripe", Rotation{Secrets: map[string]*string{"token": &newVal, "extra": nil}, RotatedBy: "bob", Reason: "compromised"})
	if err != nil {
		t.Fatal(err)
	}
	if got.SecretVersion != 2 || !slices.Equal(got.CredentialKeys, []string{"token"}) || got.LastRotatedAt.IsZero() ||
		!got.NextRotationDueAt.Equal(got.LastRotatedAt.AddDate(0, 0, 30)) || len(got.RotationHistory) != 1 ||
		got.RotationHistory[0] != (RotationEvent{Version: 2, At: got.LastRotatedAt, By: "bob", Reason: "compromised"}) {
		t.Fatalf("rotated = %+v", got)
	}
	if s := mustSecret(t, v, "stripe"); s != "new-secret" {
		t.Fatalf("secret = %q", s)
	}
	// Deleting the auth secret is refused and changes nothing.
	if _, err := v.Rotate(ctx, "stripe", Rotation{Secrets: map[string]*string{"token": nil}}); !isValidation(err) {
		t.Fatalf("deleting auth secret: err = %v", err)
	}
	if c, _ := v.Connection("stripe"); c.SecretVersion != 2 {
		t.Fatalf("failed rotation changed the version to %d", c.SecretVersion)
	}
	if _, err := v.Rotate(ctx, "nope", Rotation{Secrets: map[string]*string{"token": &newVal}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

func isValidation(err error) bool {
	var ve *ValidationError
	return errors.As(err, &ve)
}

func TestVaultUpdateKeepsMaintainedFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newTestVault(t)
	created, _ := v.Create(ctx, httpConn("gh"), map[string]string{"token": "tok-secret-1"})
	up, err := v.Update(ctx, "gh", func(c *Connection) error {
		c.Name = "renamed"
		c.ID = "hijack"
		c.SecretVersion = 99
		c.CredentialKeys = []string{"forged"}
		c.RotationIntervalDays = 7
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if up.ID != "gh" || up.SecretVersion != 1 || !slices.Equal(up.CredentialKeys, []string{"token"}) || up.Name != "renamed" ||
		!up.CreatedAt.Equal(created.CreatedAt) || !up.NextRotationDueAt.Equal(created.CreatedAt.AddDate(0, 0, 7)) {
		t.Fatalf("updated = %+v", up)
	}
	if _, err := v.Update(ctx, "gh", func(c *Connection) error { c.AuthSecretKey = "missing"; return nil }); !isValidation(err) {
		t.Fatalf("auth_secret_key naming no secret: %v", err)
	}
}

func TestVaultDeleteVariableInUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newTestVault(t)
	v.PutVariable(ctx, "SHARED", "val", "")
	v.Create(ctx, httpConn("b"), map[string]string{"token": "{{SHARED}}"})
	v.Create(ctx, httpConn("a"), map[string]string{"token": "x-{{SHARED}}"})
	v.Create(ctx, httpConn("c"), map[string]string{"token": "plain-secret"})
	err := v.DeleteVariable(ctx, "SHARED", false)
	var inUse *VariableInUseError
	if !errors.As(err, &inUse) || !errors.Is(err, ErrVariableInUse) || !slices.Equal(inUse.Connections, []string{"a", "b"}) {
		t.Fatalf("err = %v", err)
	}
	if len(v.Variables()) != 1 {
		t.Fatal("variable deleted despite being in use")
	}
	if err := v.DeleteVariable(ctx, "SHARED", true); err != nil {
		t.Fatal(err)
	}
	if r, _ := v.Lookup("a"); r != nil {
		if _, err := r.Secret(); !errors.Is(err, ErrCredentialUnresolved) {
			t.Fatalf("after forced delete: %v", err)
		}
	}
	if err := v.DeleteVariable(ctx, "SHARED", false); !errors.Is(err, ErrVariableNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// TestCiphertextSwappedInStore moves one connection's sealed secrets onto
// another record in the store: the swapped record must become unresolved,
// never yield the other connection's secret.
func TestCiphertextSwappedInStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &MemoryStore{}
	v := openTestVault(t, st, testKey(t), -1)
	v.Create(ctx, httpConn("victim"), map[string]string{"token": "victim-secret"})
	v.Create(ctx, httpConn("attacker"), map[string]string{"token": "attacker-secret"})
	if err := st.Update(ctx, func(r *Records) error {
		r.Connections["attacker"].SealedSecrets = slices.Clone(r.Connections["victim"].SealedSecrets)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := v.reload(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ := v.Lookup("attacker")
	if s, err := r.Secret(); !errors.Is(err, ErrCredentialUnresolved) {
		t.Fatalf("swapped ciphertext opened: %q, %v", s, err)
	}
	if s := mustSecret(t, v, "victim"); s != "victim-secret" {
		t.Fatalf("victim secret = %q", s)
	}
}

// TestVaultSeesOtherVaultWithinOneSecond writes through one Vault and
// waits for a polling Vault on the same store to see it.
func TestVaultSeesOtherVaultWithinOneSecond(t *testing.T) {
	t.Parallel()
	st := &MemoryStore{}
	reader := openTestVault(t, st, testKey(t), 0)
	writer := openTestVault(t, st, testKey(t), -1)
	start := time.Now()
	if _, err := writer.Create(context.Background(), httpConn("fresh"), map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for {
		if _, ok := reader.Lookup("fresh"); ok {
			t.Logf("visible after %v", time.Since(start))
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("write by another handle not visible within one second")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestValidateConnection(t *testing.T) {
	t.Parallel()
	ok := map[string]string{"token": "tok-secret-1"}
	cases := []struct {
		name    string
		mod     func(*Connection)
		secrets map[string]string
		field   string
	}{
		{"id_with_slash_path_traversal", func(c *Connection) { c.ID = "../etc" }, ok, "id"},
		{"id_too_long", func(c *Connection) { c.ID = string(make([]byte, 65)) }, ok, "id"},
		{"unknown_auth_mode", func(c *Connection) { c.AuthMode = "basic" }, ok, "auth_mode"},
		{"base_url_ftp_scheme", func(c *Connection) { c.BaseURL = "ftp://example.com" }, ok, "base_url"},
		{"base_url_userinfo_credential_leak", func(c *Connection) { c.BaseURL = "https://user:pw@example.com" }, ok, "base_url"},
		{"base_url_relative", func(c *Connection) { c.BaseURL = "/api" }, ok, "base_url"},
		{"base_url_javascript", func(c *Connection) { c.BaseURL = "javascript:alert(1)" }, ok, "base_url"},
		{"base_url_fragment", func(c *Connection) { c.BaseURL = "https://example.com/#x" }, ok, "base_url"},
		{"http_without_auth_secret_key", func(c *Connection) { c.AuthSecretKey = "" }, ok, "auth_secret_key"},
		{"auth_secret_key_names_no_secret", func(c *Connection) { c.AuthSecretKey = "nope" }, ok, "secrets"},
		{"path_prefix_dot_segments", func(c *Connection) { c.PathPrefix = "/v1/../admin" }, ok, "path_prefix"},
		{"header_name_injection", func(c *Connection) { c.AuthMode = AuthHeaderKey; c.AuthHeaderName = "X-Key\r\nEvil" }, ok, "auth_header_name"},
		{"query_param_injection", func(c *Connection) { c.AuthMode = AuthQueryParam; c.AuthQueryParam = "k&admin=1" }, ok, "auth_query_param"},
		{"bad_status", func(c *Connection) { c.Status = "paused" }, ok, "status"},
		{"upstream_cookies_on_mcp", func(c *Connection) { c.Protocol = ProtocolMCP; c.AllowUpstreamCookies = true }, ok, "allow_upstream_cookies"},
		{"malformed_template", func(c *Connection) {}, map[string]string{"token": "{{oops"}, "secrets"},
		{"empty_secret", func(c *Connection) {}, map[string]string{"token": ""}, "secrets"},
		{"secret_header_injection", func(c *Connection) {}, map[string]string{"token": "a\r\nX-Evil: 1"}, "secrets"},
		{"one_letter_secret_redaction_corrupts_responses", func(c *Connection) {}, map[string]string{"token": "t"}, "secrets"},
		{"extension_no_package_checks", func(c *Connection) {
			c.Extensions = map[string]json.RawMessage{"mcp_endpoint": json.RawMessage(`"https://evil.example"`)}
		}, ok, "mcp_endpoint"},
		{"name_right_to_left_override_shown_beside_approve", func(c *Connection) { c.Name = "GitHub\u202Enimda" }, ok, "name"},
		{"name_zero_width_space", func(c *Connection) { c.Name = "Git\u200BHub" }, ok, "name"},
		{"name_not_utf8", func(c *Connection) { c.Name = "Git\xffHub" }, ok, "name"},
		{"base_url_right_to_left_override", func(c *Connection) { c.BaseURL = "https://example.com/\u202Emoc.live" }, ok, "base_url"},
		{"subject_approval_tools_on_http", func(c *Connection) {
			c.ApprovalSubjects = map[string]approval.Rules{"alice": {Tools: []string{"pay*"}}}
		}, ok, "approval_subjects"},
		{"subject_approval_route_malformed", func(c *Connection) {
			c.ApprovalSubjects = map[string]approval.Rules{"alice": {Routes: []string{"POST"}}}
		}, ok, "approval_subjects"},
		{"subject_approval_two_spellings", func(c *Connection) {
			c.ApprovalSubjects = map[string]approval.Rules{"alice": {Routes: []string{"POST /a"}}, "Alice": {Routes: []string{"POST /b"}}}
		}, ok, "approval_subjects"},
	}
	v := newTestVault(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn := httpConn("gh")
			c.mod(conn)
			err := v.ValidateConnection(conn, c.secrets)
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != c.field {
				t.Fatalf("err = %v, want field %s", err, c.field)
			}
		})
	}
	named := httpConn("gh")
	named.Name = "Zürich ボット \u2764\uFE0F"
	if err := v.ValidateConnection(named, ok); err != nil {
		t.Fatalf("a name in other scripts: %v", err)
	}
	mcp := &Connection{ID: "m", Protocol: ProtocolMCP, BaseURL: "http://127.0.0.1:9"}
	if err := v.ValidateConnection(mcp, nil); err != nil {
		t.Fatalf("mcp without credentials: %v", err)
	}
}

// A connection's extensions are stored, loaded and encoded beside its
// fields as they came, whatever they hold; a member named as a field is a
// field, never an extension.
func TestExtensionsRoundTrip(t *testing.T) {
	t.Parallel()
	st := &MemoryStore{}
	checked := 0
	v, err := New(context.Background(), Config{Store: st, MasterKey: testKey(t), PollInterval: -1, Extensions: Extensions{
		Check: func(c *Connection) error { checked++; return nil },
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	c := httpConn("x")
	c.Extensions = map[string]json.RawMessage{"z_list": json.RawMessage(`["a","b"]`), "a_obj": json.RawMessage(`{"k":1}`)}
	if _, err := v.Create(context.Background(), c, map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	if checked != 1 {
		t.Errorf("Extensions.Check ran %d times for one create", checked)
	}
	again := openTestVault(t, st, testKey(t), -1)
	got, _ := again.Lookup("x")
	if !reflect.DeepEqual(got.Connection.Extensions, c.Extensions) {
		t.Errorf("extensions after a reload: %s", got.Connection.Extensions)
	}
	raw, _ := json.Marshal(got.Connection)
	if !strings.Contains(string(raw), `"a_obj":{"k":1},"z_list":["a","b"]}`) {
		t.Errorf("encoded: %s", raw)
	}
	var decoded Connection
	if err := json.Unmarshal([]byte(`{"id":"y","protocol":"http","base_url":"https://e.example","status":"active","credential_keys":[],"secret_version":1,"mcp_max_tools":3}`), &decoded); err != nil {
		t.Fatal(err)
	}
	if decoded.ID != "y" || string(decoded.Extensions["mcp_max_tools"]) != "3" || len(decoded.Extensions) != 1 {
		t.Errorf("decoded %+v", decoded)
	}
}

func TestRotationOverdue(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	c := &Connection{RotationIntervalDays: 30, NextRotationDueAt: due}
	if c.RotationOverdue(due.Add(-time.Hour), 0) || !c.RotationOverdue(due.Add(time.Hour), 0) || c.RotationOverdue(due.Add(time.Hour), 24*time.Hour) {
		t.Fatal("overdue computation wrong")
	}
	if (&Connection{}).RotationOverdue(due, 0) {
		t.Fatal("connection without interval is overdue")
	}
	for in, want := range map[string]RotationEnforcement{"": RotationWarn, "off": RotationOff, "block": RotationBlock} {
		if got, err := ParseRotationEnforcement(in); err != nil || got != want {
			t.Errorf("ParseRotationEnforcement(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseRotationEnforcement("strict"); err == nil {
		t.Error("accepted unknown policy")
	}
}

func BenchmarkLookup(b *testing.B) {
	v := newTestVault(b)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "github", "openai", "stripe"} {
		if _, err := v.Create(ctx, httpConn(id), map[string]string{"token": "tok-secret-1"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		r, ok := v.Lookup("github")
		if !ok {
			b.Fatal("missing")
		}
		if _, err := r.Secret(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestConcurrentWritersShareOneStore writes from two Vaults at once (as
// the CLI and a running gateway do): every write lands.
func TestConcurrentWritersShareOneStore(t *testing.T) {
	t.Parallel()
	st := &MemoryStore{}
	a := openTestVault(t, st, testKey(t), -1)
	b := openTestVault(t, st, testKey(t), -1)
	const n = 25
	errs := make(chan error, 2*n)
	for _, w := range []struct {
		v      *Vault
		prefix string
	}{{a, "a"}, {b, "b"}} {
		go func() {
			for i := 0; i < n; i++ {
				_, err := w.v.Create(context.Background(), httpConn(fmt.Sprintf("%s-%d", w.prefix, i)), map[string]string{"token": "tok-secret-1"})
				errs <- err
			}
		}()
	}
	for i := 0; i < 2*n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := a.reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(a.Connections()); got != 2*n {
		t.Fatalf("%d connections stored, want %d", got, 2*n)
	}
}

// TestErrorsArePlain: the vault's errors carry no code; the HTTP edge
// (the admin API) maps them, so storage knows nothing of answers.
func TestErrorsArePlain(t *testing.T) {
	t.Parallel()
	for _, err := range []error{ErrNotFound, ErrVariableNotFound, ErrExists, ErrVariableInUse, ErrCredentialUnresolved,
		ErrWrongMasterKey, &VariableInUseError{Key: "K"}, invalid("base_url", "must be absolute")} {
		if code, ok := errcode.Of(err); ok {
			t.Errorf("%v carries %s", err, code)
		}
	}
}

// TestShortSecretRefused: a secret shorter than MinSecretLen would be
// replaced wherever its bytes occur in a response; it is refused when
// written, with the minimum in the message, and a {{KEY}} secret whose
// variable makes it shorter is unresolved rather than redacted.
func TestShortSecretRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newTestVault(t)
	_, err := v.Create(ctx, httpConn("short"), map[string]string{"token": "t"})
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "secrets" || !strings.Contains(ve.Message, "shorter than 8 bytes, the minimum") ||
		!strings.Contains(ve.Message, "corrupt") {
		t.Fatalf("one-letter secret: err = %v, want a validation error naming the minimum and why", err)
	}
	if _, err := v.Create(ctx, httpConn("ok"), map[string]string{"token": "12345678"}); err != nil {
		t.Fatalf("secret of exactly the minimum: %v", err)
	}
	short := "1234567"
	if _, err := v.Rotate(ctx, "ok", Rotation{Secrets: map[string]*string{"token": &short}}); !errors.As(err, &ve) {
		t.Fatalf("rotation to a short secret: err = %v", err)
	}
	if _, _, err := v.PutVariable(ctx, "PIN", "42", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Create(ctx, httpConn("tpl"), map[string]string{"token": "{{PIN}}"}); err != nil {
		t.Fatal(err)
	}
	r, _ := v.Lookup("tpl")
	if _, err := r.Secret(); !errors.Is(err, ErrCredentialUnresolved) || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("secret resolving to 2 bytes: err = %v, want unresolved", err)
	}
	if len(r.Redactions()) != 0 {
		t.Fatalf("redactions of an unresolved secret = %q", r.Redactions())
	}
	if _, _, err := v.PutVariable(ctx, "PIN", "43", ""); !errors.As(err, &ve) || ve.Field != "value" || !strings.Contains(ve.Message, `"tpl"`) {
		t.Fatalf("a referenced variable that keeps the secret short: err = %v", err)
	}
	if _, _, err := v.PutVariable(ctx, "PIN", "12345678", ""); err != nil {
		t.Fatal(err)
	}
	if s := mustSecret(t, v, "tpl"); s != "12345678" {
		t.Fatalf("secret = %q", s)
	}
}

// A connection whose name was stored before the display rule keeps working
// and can still have its secret replaced (a leaked one cannot wait for a
// rename); changing its settings asks for a clean name.
func TestNameStoredBeforeTheDisplayRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newTestVault(t)
	if _, err := v.Create(ctx, httpConn("gh"), map[string]string{"token": "old-secret-1"}); err != nil {
		t.Fatal(err)
	}
	if err := v.write(ctx, func(r *Records) error {
		r.Connections["gh"].Connection.Name = "GitHub\u202Enimda"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fresh := "new-secret-2"
	if _, err := v.Rotate(ctx, "gh", Rotation{Secrets: map[string]*string{"token": &fresh}, Reason: "compromised"}); err != nil {
		t.Fatalf("rotating a connection with an old name: %v", err)
	}
	_, err := v.Update(ctx, "gh", func(c *Connection) error { c.Status = StatusDisabled; return nil })
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "name" {
		t.Fatalf("update keeping the old name: %v, want a name error", err)
	}
	if _, err := v.Update(ctx, "gh", func(c *Connection) error { c.Name, c.Status = "GitHub", StatusDisabled; return nil }); err != nil {
		t.Fatalf("update with a clean name: %v", err)
	}
}

// A blob moved to another name does not open, as a secret moved to
// another record does not.
func TestStoredBlobSwappedDoesNotOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &MemoryStore{}
	v := openTestVault(t, st, testKey(t), -1)
	if err := v.PutBlob(ctx, "victim", []byte("victim-value"), false); err != nil {
		t.Fatal(err)
	}
	if err := v.PutBlob(ctx, "attacker", []byte("attacker-value"), false); err != nil {
		t.Fatal(err)
	}
	st.Update(ctx, func(r *Records) error { r.Blobs["attacker"] = r.Blobs["victim"]; return nil })
	again := openTestVault(t, st, testKey(t), -1)
	if b, err := again.Blob("attacker"); err == nil {
		t.Fatalf("swapped blob opened: %q", b)
	}
	if err := v.PutBlob(ctx, "", []byte("x"), false); !isValidation(err) {
		t.Fatalf("empty blob name: %v", err)
	}
}

// flakyStore fails while down, and reports each Generation call.
type flakyStore struct {
	MemoryStore
	down  atomic.Bool
	polls chan struct{}
}

func (s *flakyStore) Generation(ctx context.Context) (uint64, error) {
	defer func() {
		select {
		case s.polls <- struct{}{}:
		default:
		}
	}()
	if s.down.Load() {
		return 0, ErrStoreUnavailable
	}
	return s.MemoryStore.Generation(ctx)
}

// countingHandler counts log records by message.
type countingHandler struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs[r.Message]++
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msgs[msg]
}

// TestOutageLoggedOnce: a store that stays away for many polls is logged
// when it goes and when it comes back, not at every poll.
func TestOutageLoggedOnce(t *testing.T) {
	t.Parallel()
	st := &flakyStore{polls: make(chan struct{})}
	h := &countingHandler{msgs: map[string]int{}}
	v, err := New(context.Background(), Config{Store: st, MasterKey: testKey(t), PollInterval: time.Millisecond, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	const down, back = "credvault: the store does not answer; serving what was loaded", "credvault: the store answers again"
	st.down.Store(true)
	for range 20 {
		<-st.polls
	}
	st.down.Store(false)
	for range 3 {
		<-st.polls
	}
	if h.count(down) != 1 || h.count(back) != 1 {
		t.Fatalf("outage logged %d times, recovery %d times; want once each", h.count(down), h.count(back))
	}
}

// TestOnChangeAfterEveryRebuild: OnChange follows this Vault's own writes
// and another process's, once its poll notices them.
func TestOnChangeAfterEveryRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &MemoryStore{}
	changed := make(chan struct{}, 16)
	reader, err := New(ctx, Config{Store: st, MasterKey: testKey(t), PollInterval: time.Millisecond,
		OnChange: func() { changed <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	<-changed // the first load
	writer := openTestVault(t, st, testKey(t), -1)
	if _, _, err := writer.PutVariable(ctx, "K", "variable-value", ""); err != nil {
		t.Fatal(err)
	}
	<-changed
	if len(reader.Variables()) != 1 {
		t.Fatal("OnChange ran before the snapshot held the other process's write")
	}
	if _, _, err := reader.PutVariable(ctx, "L", "variable-value", ""); err != nil {
		t.Fatal(err)
	}
	<-changed
	if len(reader.Variables()) != 2 {
		t.Fatal("OnChange ran before the snapshot held the Vault's own write")
	}
}
