package gatewayd

import (
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
)

func envOf(m map[string]string) (func(string) string, []string) {
	var environ []string
	for k, v := range m {
		environ = append(environ, k+"="+v)
	}
	return func(k string) string { return m[k] }, environ
}

func validEnv() map[string]string {
	key, _ := credvault.GenerateMasterKey()
	return map[string]string{
		"GATEWAY_MASTER_KEY":  key.Encode(),
		"GATEWAY_ADMIN_TOKEN": "0123456789abcdef0123",
		"IDN_REGISTRY_URL":    "http://127.0.0.1:8787/",
		"GATEWAY_DATA_DIR":    "/tmp/gw",
	}
}

func TestLoadSettingsDefaults(t *testing.T) {
	getenv, environ := envOf(validEnv())
	s, err := LoadSettings(getenv, environ)
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr != ":38100" || s.ClaimsTTL != 30*time.Second || s.ShutdownTimeout != 15*time.Second ||
		s.RegistryURL != "http://127.0.0.1:8787" || s.IdentityHome != "/tmp/gw/identity" ||
		s.CatalogFile != "/tmp/gw/service-catalog.json" || !s.RequireSignedAdminChecks ||
		s.RotationEnforcement != credvault.RotationWarn || s.NonceMaxEntries != 1_000_000 || s.MaxBodyBytes != 8<<20 {
		t.Errorf("defaults: %+v", s)
	}
}

func TestLoadSettingsListsEveryProblem(t *testing.T) {
	env := map[string]string{
		"GATEWAY_MASTER_KEY":                   "not-base64!",
		"GATEWAY_ADMIN_ACCESS_MODE":            "open",
		"GATEWAY_CLAIMS_CACHE_TTL_SECONDS":     "ten",
		"GATEWAY_TRUSTED_PROXY_CIDRS":          "10.0.0.0/33",
		"GATEWAY_ROTATION_ENFORCEMENT":         "maybe",
		"GATEWAY_PATH_ALIASES":                 "nope",
		"GATEWAY_LOG_PROXY_REQUESTS":           "sometimes",
		"GATEWAY_ALLOW_UNSIGNED_CONNECTIONS":   "bad id!",
		"GATEWAY_IDN_NAMESPACE":                "x",
		"IDN_REGISTRY_URL":                     "ftp://cp",
		"GATEWAY_SIGNATURE_MAX_AGE_SECONDS":    "-5",
		"GATEWAY_MCP_CIRCUIT_BREAKER_FAILURES": "-1",
	}
	getenv, environ := envOf(env)
	_, err := LoadSettings(getenv, environ)
	if err == nil {
		t.Fatal("accepted invalid settings")
	}
	for _, name := range []string{"GATEWAY_MASTER_KEY", "GATEWAY_ADMIN_ACCESS_MODE", "GATEWAY_CLAIMS_CACHE_TTL_SECONDS",
		"GATEWAY_TRUSTED_PROXY_CIDRS", "GATEWAY_ROTATION_ENFORCEMENT", "GATEWAY_PATH_ALIASES", "GATEWAY_LOG_PROXY_REQUESTS",
		"GATEWAY_ALLOW_UNSIGNED_CONNECTIONS", "GATEWAY_IDN_NAMESPACE", "IDN_REGISTRY_URL", "GATEWAY_SIGNATURE_MAX_AGE_SECONDS",
		"GATEWAY_MCP_CIRCUIT_BREAKER_FAILURES"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not mention %s:\n%v", name, err)
		}
	}
	if strings.Contains(err.Error(), "not-base64!") {
		t.Errorf("error echoes the master key value:\n%v", err)
	}
}

func TestLoadSettingsRequiresAdminToken(t *testing.T) {
	env := validEnv()
	delete(env, "GATEWAY_ADMIN_TOKEN")
	getenv, environ := envOf(env)
	if _, err := LoadSettings(getenv, environ); err == nil || !strings.Contains(err.Error(), "openssl rand") {
		t.Errorf("hybrid without a token: %v", err)
	}
	env["GATEWAY_ADMIN_ACCESS_MODE"] = "loopback"
	getenv, environ = envOf(env)
	if _, err := LoadSettings(getenv, environ); err != nil {
		t.Errorf("loopback mode needs no token: %v", err)
	}
}

func TestAPIKeyFor(t *testing.T) {
	env := validEnv()
	env["IDN_SERVICE_API_KEY"] = "idn_sk_global"
	env["IDN_SERVICE_API_KEY_MY_GITHUB"] = "idn_sk_github"
	getenv, environ := envOf(env)
	s, err := LoadSettings(getenv, environ)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.APIKeyFor("my-github"); got != "idn_sk_github" {
		t.Errorf("override: %q", got)
	}
	if got := s.APIKeyFor("other"); got != "idn_sk_global" {
		t.Errorf("global: %q", got)
	}
}

func TestLoadSettingsInflightBodyBytes(t *testing.T) {
	for _, tc := range []struct {
		name, inflight, maxBody string
		want                    int64
		problem                 bool
	}{
		{name: "default is 256 MiB", want: 256 << 20},
		{name: "set", inflight: "67108864", want: 64 << 20},
		{name: "below one request's limit", inflight: "1048576", maxBody: "2097152", problem: true},
		{name: "not a number", inflight: "lots", problem: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := validEnv()
			if tc.inflight != "" {
				env["GATEWAY_MAX_INFLIGHT_BODY_BYTES"] = tc.inflight
			}
			if tc.maxBody != "" {
				env["GATEWAY_MAX_REQUEST_BODY_BYTES"] = tc.maxBody
			}
			getenv, environ := envOf(env)
			s, err := LoadSettings(getenv, environ)
			if tc.problem {
				if err == nil || !strings.Contains(err.Error(), "GATEWAY_MAX_INFLIGHT_BODY_BYTES") {
					t.Fatalf("err %v, want a problem with GATEWAY_MAX_INFLIGHT_BODY_BYTES", err)
				}
				return
			}
			if err != nil || s.MaxInflightBodyBytes != tc.want {
				t.Fatalf("MaxInflightBodyBytes = %d, %v; want %d", s.MaxInflightBodyBytes, err, tc.want)
			}
		})
	}
}
