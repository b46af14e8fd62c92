package main

import (
	"errors"
	"github.com/idnhq/idn/gateway/gctune"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/kit/envconf"
	"github.com/idnhq/idn/replay"
)

func validEnv() map[string]string {
	key, _ := credvault.GenerateMasterKey()
	return map[string]string{
		"GATEWAY_MASTER_KEY":  key.Encode(),
		"GATEWAY_ADMIN_TOKEN": "0123456789abcdef0123",
		"IDN_REGISTRY_URL":    "http://127.0.0.1:8787/",
		"GATEWAY_DATA_DIR":    "/tmp/gw",
	}
}

// load reads serve's settings from env as the process would.
func load(env map[string]string) (serveSettings, error) {
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	getenv := func(k string) string { return env[k] }
	r := envconf.New(getenv)
	s := readServe(r, getenv, environ, "")
	return s, r.Err()
}

func TestServeSettingsDefaults(t *testing.T) {
	t.Parallel()
	s, err := load(validEnv())
	if err != nil {
		t.Fatal(err)
	}
	c := s.gateway
	if s.addr != "127.0.0.1:38100" || s.shutdownTimeout != 15*time.Second || s.log.Format != "json" {
		t.Errorf("server defaults: %+v", s)
	}
	if c.Claims.TTL != 30*time.Second || c.ControlPlaneURL != "http://127.0.0.1:8787" || c.InsecureUnsignedAdminChecks ||
		c.Admin.Mode != admin.AccessHybrid || c.Proxy.RotationEnforcement != credvault.RotationWarn || c.Nonces.MaxBytes != 256<<20 ||
		c.Proxy.MaxBodyBytes != 8<<20 || c.Proxy.MaxInflightBodyBytes != 256<<20 || c.MCP.BreakerFailures != 3 || c.ClaimSubmissions.RatePerMinute != 30 ||
		c.MCP.SessionIdleTimeout != 10*time.Minute || c.MCP.MaxSessions != 1000 || c.MCP.MaxSessionsPerKey != 32 || c.MCP.MaxSessionsPerNamespace != 128 {
		t.Errorf("gateway defaults: %+v", c)
	}
}

// GATEWAY_MCP_ATTEMPT_TIMEOUT_SECONDS unset leaves MCP.AttemptTimeout at
// zero, which is the MCP timeout; it takes no negative value, which would
// leave attempts unbounded.
func TestServeSettingsMCPAttemptTimeout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		set  string
		want time.Duration
		bad  bool
	}{{"", 0, false}, {"20", 20 * time.Second, false}, {"-1", 0, true}} {
		env := validEnv()
		if tt.set != "" {
			env["GATEWAY_MCP_ATTEMPT_TIMEOUT_SECONDS"] = tt.set
		}
		s, err := load(env)
		if tt.bad != (err != nil) || !tt.bad && s.gateway.MCP.AttemptTimeout != tt.want {
			t.Errorf("GATEWAY_MCP_ATTEMPT_TIMEOUT_SECONDS=%q: %v, %v", tt.set, s.gateway.MCP.AttemptTimeout, err)
		}
	}
}

func TestServeSettingsMCPSessions(t *testing.T) {
	t.Parallel()
	env := validEnv()
	env["GATEWAY_MCP_SESSION_IDLE_SECONDS"] = "30"
	env["GATEWAY_MCP_MAX_SESSIONS"] = "5"
	env["GATEWAY_MCP_MAX_SESSIONS_PER_KEY"] = "2"
	env["GATEWAY_MCP_MAX_SESSIONS_PER_NAMESPACE"] = "3"
	s, err := load(env)
	if err != nil || s.gateway.MCP.SessionIdleTimeout != 30*time.Second || s.gateway.MCP.MaxSessions != 5 ||
		s.gateway.MCP.MaxSessionsPerKey != 2 || s.gateway.MCP.MaxSessionsPerNamespace != 3 {
		t.Fatalf("%+v, %v", s.gateway, err)
	}
	for _, bad := range []map[string]string{
		{"GATEWAY_MCP_SESSION_IDLE_SECONDS": "0"}, {"GATEWAY_MCP_MAX_SESSIONS": "0"},
		{"GATEWAY_MCP_MAX_SESSIONS_PER_KEY": "0"}, {"GATEWAY_MCP_MAX_SESSIONS_PER_NAMESPACE": "-1"},
	} {
		env := validEnv()
		for k, v := range bad {
			env[k] = v
		}
		if _, err := load(env); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestServeSettingsNonceMemory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want int64 // 0: a configuration problem
	}{
		{"budget in bytes", map[string]string{"GATEWAY_NONCE_MEMORY_BYTES": "1073741824"}, 1 << 30},
		{"deprecated entry count becomes the memory for them", map[string]string{"GATEWAY_NONCE_MAX_ENTRIES": "2000000"}, 2_000_000 * replay.Bytes},
		{"small deprecated entry count gets the smallest budget", map[string]string{"GATEWAY_NONCE_MAX_ENTRIES": "10"}, 1 << 20},
		{"both set", map[string]string{"GATEWAY_NONCE_MAX_ENTRIES": "2000000", "GATEWAY_NONCE_MEMORY_BYTES": "1073741824"}, 0},
		{"budget below 1 MiB", map[string]string{"GATEWAY_NONCE_MEMORY_BYTES": "65536"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := validEnv()
			for k, v := range tt.env {
				env[k] = v
			}
			s, err := load(env)
			switch {
			case tt.want == 0 && err == nil:
				t.Fatalf("accepted, Nonces.MaxBytes %d", s.gateway.Nonces.MaxBytes)
			case tt.want != 0 && (err != nil || s.gateway.Nonces.MaxBytes != tt.want):
				t.Fatalf("Nonces.MaxBytes %d, %v; want %d", s.gateway.Nonces.MaxBytes, err, tt.want)
			}
		})
	}
}

func TestServeSettingsMemoryLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want int64 // 0: a configuration problem
	}{
		{"default: the nonce budget and the headroom", nil, replay.DefaultMaxBytes + gctune.MemoryHeadroom},
		{"default follows the nonce budget", map[string]string{"GATEWAY_NONCE_MEMORY_BYTES": "1073741824"}, 1<<30 + gctune.MemoryHeadroom},
		{"set", map[string]string{"GATEWAY_MEMORY_LIMIT_BYTES": "209715200", "GATEWAY_NONCE_MEMORY_BYTES": "16777216"}, 200 << 20},
		{"not above the nonce budget", map[string]string{"GATEWAY_MEMORY_LIMIT_BYTES": "16777216", "GATEWAY_NONCE_MEMORY_BYTES": "16777216"}, 0},
		{"not a number", map[string]string{"GATEWAY_MEMORY_LIMIT_BYTES": "200MiB"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := validEnv()
			for k, v := range tt.env {
				env[k] = v
			}
			s, err := load(env)
			switch {
			case tt.want == 0 && err == nil:
				t.Fatalf("accepted, memory limit %d", s.memoryLimit)
			case tt.want != 0 && (err != nil || s.memoryLimit != tt.want):
				t.Fatalf("memory limit %d, %v; want %d", s.memoryLimit, err, tt.want)
			}
		})
	}
}

// A setting whose 0 turns something off reaches the library as its
// negative "off", not as its zero "default".
func TestServeSettingsZeroMeansOff(t *testing.T) {
	t.Parallel()
	env := validEnv()
	env["GATEWAY_MCP_DISCOVERY_STALE_IF_ERROR_SECONDS"] = "0"
	env["GATEWAY_MCP_CIRCUIT_BREAKER_FAILURES"] = "0"
	env["GATEWAY_MCP_TOOL_CALL_RATE_LIMIT_PER_MINUTE"] = "0"
	env["GATEWAY_CLAIM_REGISTRATION_RATE_LIMIT_PER_MINUTE"] = "0"
	s, err := load(env)
	if err != nil {
		t.Fatal(err)
	}
	c := s.gateway
	if c.MCP.StaleIfError >= 0 || c.MCP.BreakerFailures >= 0 || c.MCP.RateLimitPerMinute >= 0 || c.ClaimSubmissions.RatePerMinute >= 0 {
		t.Errorf("0 did not become off: %+v", c)
	}
}

func TestServeSettingsListEveryProblem(t *testing.T) {
	t.Parallel()
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
		"LOG_LEVEL":                            "loud",
		"LOG_FORMAT":                           "xml",
		"GATEWAY_DATA_DIR":                     "/tmp/gw",
	}
	_, err := load(env)
	var problems *envconf.Problems
	if !errors.As(err, &problems) {
		t.Fatalf("err = %v, want *envconf.Problems", err)
	}
	for _, name := range []string{"GATEWAY_MASTER_KEY", "GATEWAY_ADMIN_ACCESS_MODE", "GATEWAY_CLAIMS_CACHE_TTL_SECONDS",
		"GATEWAY_TRUSTED_PROXY_CIDRS", "GATEWAY_ROTATION_ENFORCEMENT", "GATEWAY_PATH_ALIASES", "GATEWAY_LOG_PROXY_REQUESTS",
		"GATEWAY_ALLOW_UNSIGNED_CONNECTIONS", "GATEWAY_IDN_NAMESPACE", "IDN_REGISTRY_URL", "GATEWAY_SIGNATURE_MAX_AGE_SECONDS",
		"GATEWAY_MCP_CIRCUIT_BREAKER_FAILURES", "LOG_LEVEL", "LOG_FORMAT"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not mention %s:\n%v", name, err)
		}
	}
	if strings.Contains(err.Error(), "not-base64!") {
		t.Errorf("error echoes the master key value:\n%v", err)
	}
}

// TestServeSettingsAdminToken: without GATEWAY_ADMIN_TOKEN every mode
// starts (the data directory's token is used); a set token must be long.
func TestServeSettingsAdminToken(t *testing.T) {
	t.Parallel()
	env := validEnv()
	delete(env, "GATEWAY_ADMIN_TOKEN")
	for _, mode := range []string{"hybrid", "loopback", "token"} {
		env["GATEWAY_ADMIN_ACCESS_MODE"] = mode
		if s, err := load(env); err != nil || s.gateway.Admin.Token != "" {
			t.Errorf("%s without a token: %v (token %q)", mode, err, s.gateway.Admin.Token)
		}
	}
	env["GATEWAY_ADMIN_TOKEN"] = "short"
	if _, err := load(env); err == nil || !strings.Contains(err.Error(), "openssl rand") {
		t.Errorf("short token: %v", err)
	}
}

func TestConnectionAPIKey(t *testing.T) {
	t.Parallel()
	env := validEnv()
	env["IDN_SERVICE_API_KEY"] = "idn_sk_global"
	env["IDN_SERVICE_API_KEY_MY_GITHUB"] = "idn_sk_github"
	s, err := load(env)
	if err != nil {
		t.Fatal(err)
	}
	if s.gateway.ServiceAPIKey != "idn_sk_global" || s.gateway.ConnectionAPIKey == nil {
		t.Fatalf("keys: %q, per-connection set %v", s.gateway.ServiceAPIKey, s.gateway.ConnectionAPIKey != nil)
	}
	if got := s.gateway.ConnectionAPIKey("my-github"); got != "idn_sk_github" {
		t.Errorf("override: %q", got)
	}
	if got := s.gateway.ConnectionAPIKey("other"); got != "" {
		t.Errorf("a connection without its own key: %q, want empty (the library falls back)", got)
	}
}

// GATEWAY_SERVICE_API_KEY_FILE stands in for IDN_SERVICE_API_KEY (what
// controlplane provision writes); a problem with it names the file, never
// the key.
func TestServiceAPIKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile, blank := filepath.Join(dir, "service-api-key"), filepath.Join(dir, "blank")
	os.WriteFile(keyFile, []byte("idn_sk_fromfile\n"), 0o600)
	os.WriteFile(blank, []byte("\n"), 0o600)
	env := validEnv()
	env["GATEWAY_SERVICE_API_KEY_FILE"] = keyFile
	if s, err := load(env); err != nil || s.gateway.ServiceAPIKey != "idn_sk_fromfile" {
		t.Fatalf("key from file: %v, %q", err, s.gateway.ServiceAPIKey)
	}
	for _, tc := range []struct{ name, file, key, want string }{
		{"missing file", filepath.Join(dir, "absent"), "", "GATEWAY_SERVICE_API_KEY_FILE"},
		{"blank file", blank, "", "does not hold one API key"},
		{"both set", keyFile, "idn_sk_env", "not both"},
	} {
		env["GATEWAY_SERVICE_API_KEY_FILE"], env["IDN_SERVICE_API_KEY"] = tc.file, tc.key
		_, err := load(env)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "idn_sk_") {
			t.Errorf("%s: %v, want a problem with %q and no key", tc.name, err, tc.want)
		}
	}
}

func TestServeSettingsInflightBodyBytes(t *testing.T) {
	t.Parallel()
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
			s, err := load(env)
			if tc.problem {
				if err == nil || !strings.Contains(err.Error(), "GATEWAY_MAX_INFLIGHT_BODY_BYTES") {
					t.Fatalf("err %v, want a problem with GATEWAY_MAX_INFLIGHT_BODY_BYTES", err)
				}
				return
			}
			if err != nil || s.gateway.Proxy.MaxInflightBodyBytes != tc.want {
				t.Fatalf("MaxInflightBodyBytes = %d, %v; want %d", s.gateway.Proxy.MaxInflightBodyBytes, err, tc.want)
			}
		})
	}
}

func TestBindingSettings(t *testing.T) {
	t.Parallel()
	env := validEnv()
	env["GATEWAY_ADMIN_HOSTS"] = " gw.example.com , [2001:db8::1] "
	env["GATEWAY_PUBLIC_AUTHORITY"] = "gw.example.com:8443"
	s, err := load(env)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.gateway.Admin.Hosts, ",") != "gw.example.com,[2001:db8::1]" || s.gateway.Proxy.PublicAuthority != "gw.example.com:8443" {
		t.Errorf("parsed %q %q", s.gateway.Admin.Hosts, s.gateway.Proxy.PublicAuthority)
	}
	for name, bad := range map[string][2]string{
		"admin_host_with_port":      {"GATEWAY_ADMIN_HOSTS", "gw.example.com:8443"},
		"admin_host_wildcard":       {"GATEWAY_ADMIN_HOSTS", "*.example.com"},
		"admin_host_url":            {"GATEWAY_ADMIN_HOSTS", "https://gw.example.com"},
		"public_authority_url":      {"GATEWAY_PUBLIC_AUTHORITY", "https://gw.example.com"},
		"public_authority_path":     {"GATEWAY_PUBLIC_AUTHORITY", "gw.example.com/x"},
		"public_authority_userinfo": {"GATEWAY_PUBLIC_AUTHORITY", "u@gw.example.com"},
		"public_authority_bad_port": {"GATEWAY_PUBLIC_AUTHORITY", "gw.example.com:https"},
	} {
		t.Run(name, func(t *testing.T) {
			env := validEnv()
			env[bad[0]] = bad[1]
			if _, err := load(env); err == nil || !strings.Contains(err.Error(), bad[0]) {
				t.Errorf("settings = %v, want an error naming %s", err, bad[0])
			}
		})
	}
}

// Every variable serve reads is listed by -h with its meaning.
func TestServeVarsDocumented(t *testing.T) {
	t.Parallel()
	vars := serveVars()
	seen := map[string]bool{}
	for _, v := range vars {
		if v.Doc == "" {
			t.Errorf("%s has no meaning", v.Name)
		}
		seen[v.Name] = true
	}
	for _, name := range []string{"GATEWAY_ADDR", "GATEWAY_MASTER_KEY", "GATEWAY_DATA_DIR", "IDN_REGISTRY_URL",
		"IDN_SERVICE_API_KEY_<CONNECTION_ID>", "LOG_LEVEL", "LOG_FORMAT", "GOGC", "GOMEMLIMIT", "GATEWAY_MEMORY_LIMIT_BYTES", "GATEWAY_SHUTDOWN_TIMEOUT_SECONDS"} {
		if !seen[name] {
			t.Errorf("serve -h does not list %s", name)
		}
	}
}
