package credvault_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/idnhq/idn/credvault"
)

func TestNewResolved(t *testing.T) {
	t.Parallel()
	const secret = "resolved-SECRET-9f3a"
	bearer := func() *credvault.Connection {
		return &credvault.Connection{ID: "gh", BaseURL: "https://api.example.com", PathPrefix: "/v3",
			AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}
	}
	r, err := credvault.NewResolved(bearer(), secret)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Secret(); got != secret || err != nil {
		t.Errorf("Secret = %q, %v", got, err)
	}
	if base, err := r.UpstreamBase(); err != nil || base.String() != "https://api.example.com/v3" {
		t.Errorf("UpstreamBase = %v, %v", base, err)
	}
	if red := r.Redactions(); !slices.Contains(red, secret) || !slices.Contains(red, "Bearer "+secret) {
		t.Errorf("Redactions = %q", red)
	}
	if r.Connection.Status != credvault.StatusActive || r.Connection.Protocol != credvault.ProtocolHTTP {
		t.Errorf("defaults not applied: %+v", r.Connection)
	}

	for _, tt := range []struct {
		name   string
		c      *credvault.Connection
		secret string
		is     error
	}{
		{"nil_connection", nil, secret, nil},
		{"relative_base_url", &credvault.Connection{ID: "x", BaseURL: "/api", AuthMode: "bearer", AuthSecretKey: "t"}, secret, nil},
		{"http_without_credential", &credvault.Connection{ID: "x", BaseURL: "https://a.example"}, "", nil},
		{"empty_secret", bearer(), "", nil},
		{"variable_reference_without_variables", bearer(), "{{GH_TOKEN}}", credvault.ErrCredentialUnresolved},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := credvault.NewResolved(tt.c, tt.secret)
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("NewResolved = %v, want an error (%v)", err, tt.is)
			}
			if tt.secret != "" && strings.Contains(err.Error(), tt.secret) {
				t.Errorf("error echoes the secret: %v", err)
			}
		})
	}
}

// A Resolved written as a literal, as a proxy.Connections implementation
// might, never panics: its base URL is parsed when asked for, and its
// missing credential is an error.
func TestResolvedLiteral(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name               string
		r                  *credvault.Resolved
		secretErr, baseErr bool
		wantBase           string
	}{
		{name: "literal_http_connection_has_no_credential",
			r:         &credvault.Resolved{Connection: &credvault.Connection{ID: "gh", BaseURL: "https://api.example.com", AuthSecretKey: "token"}},
			secretErr: true, wantBase: "https://api.example.com"},
		{name: "literal_mcp_connection_without_credential",
			r:        &credvault.Resolved{Connection: &credvault.Connection{ID: "m", Protocol: "mcp", BaseURL: "https://mcp.example.com"}},
			wantBase: "https://mcp.example.com"},
		{name: "literal_without_connection", r: &credvault.Resolved{}, secretErr: true, baseErr: true},
		{name: "literal_with_relative_base_url",
			r:         &credvault.Resolved{Connection: &credvault.Connection{ID: "x", BaseURL: "/api", AuthSecretKey: "t"}},
			secretErr: true, baseErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.r.Secret()
			if (err != nil) != tt.secretErr || (err != nil && !errors.Is(err, credvault.ErrCredentialUnresolved)) {
				t.Errorf("Secret err = %v, want error %v matching ErrCredentialUnresolved", err, tt.secretErr)
			}
			base, err := tt.r.UpstreamBase()
			if (err != nil) != tt.baseErr || (err == nil && base.String() != tt.wantBase) {
				t.Errorf("UpstreamBase = %v, %v", base, err)
			}
			if tt.r.Redactions() != nil {
				t.Errorf("Redactions = %q, want none", tt.r.Redactions())
			}
		})
	}
}

// A program that keeps its credentials elsewhere (here a map standing in
// for environment variables) serves them to a proxy as Resolved values.
func ExampleNewResolved() {
	secrets := map[string]string{"WEATHER_TOKEN": "token-from-the-environment"}
	c := &credvault.Connection{ID: "weather", BaseURL: "https://api.weather.example",
		AuthMode: credvault.AuthBearer, AuthSecretKey: "WEATHER_TOKEN"}
	r, err := credvault.NewResolved(c, secrets[c.AuthSecretKey])
	if err != nil {
		panic(err)
	}
	base, _ := r.UpstreamBase()
	fmt.Println(r.Connection.ID, base, r.Connection.AuthPrefix+"…")

	_, err = credvault.NewResolved(c, "")
	fmt.Println(err)
	// Output:
	// weather https://api.weather.example Bearer …
	// credvault: invalid secrets: value of "WEATHER_TOKEN" is empty
}
