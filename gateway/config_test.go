package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/proxy"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/idnhq/idn/kit/openapicheck"
)

func minimalConfig(t *testing.T) gateway.Config {
	t.Helper()
	key, err := credvault.GenerateMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	return gateway.Config{DataDir: t.TempDir(), MasterKey: key, ControlPlaneURL: "http://127.0.0.1:1"}
}

func TestNewListsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := gateway.New(gateway.Config{
		ControlPlaneURL: "ftp://cp", Namespace: "x",
		Proxy: proxy.Options{
			MaxBodyBytes: 2 << 20, MaxInflightBodyBytes: 1 << 20,
			PublicAuthority: "https://gw.example.com", InsecureUnsignedConnections: []string{"bad id!"},
		},
		Claims: claimcache.Options{TTL: 5e9, RefreshInterval: 10e9},
		Admin:  admin.AccessOptions{Hosts: []string{"gw.example.com:8443"}},
	})
	if err == nil {
		t.Fatal("New accepted an invalid Config")
	}
	for _, want := range []string{"DataDir", "MasterKey", "ControlPlaneURL", "Namespace", "Claims.TTL", "Proxy.MaxInflightBodyBytes",
		"Admin.Hosts", "Proxy.PublicAuthority", "Proxy.InsecureUnsignedConnections"} {
		if !strings.Contains(err.Error(), "gateway: Config."+want) {
			t.Errorf("error does not name Config.%s:\n%v", want, err)
		}
	}
	if _, err := gateway.New(gateway.Config{}); err == nil || !strings.Contains(err.Error(), "ControlPlaneURL is required") {
		t.Errorf("zero Config: %v", err)
	}
}

func TestZeroConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg := minimalConfig(t)
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	srv := httptest.NewServer(openapicheck.Watch(t, gw))
	defer srv.Close()

	// Without AdminToken a loopback client reads the admin API without a
	// token (hybrid mode; the token is made in the data directory).
	resp, err := http.Get(srv.URL + "/api/admin/connections")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("admin API from loopback without a token: %d", resp.StatusCode)
	}
	// /health reports the binary's version.
	resp, err = http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var health struct{ Version string }
	_ = json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if health.Version != buildinfo.Version() {
		t.Errorf("/health version %q, want %q", health.Version, buildinfo.Version())
	}
	if gw.Identity().Namespace != "gateway" {
		t.Errorf("namespace %q, want gateway", gw.Identity().Namespace)
	}
}

// A token that is set must be a real one, whatever the mode.
func TestShortAdminTokenRefused(t *testing.T) {
	t.Parallel()
	cfg := minimalConfig(t)
	cfg.Admin.Token = "short"
	if _, err := gateway.New(cfg); err == nil || !strings.Contains(err.Error(), "16") {
		t.Fatalf("New with a short token and no mode: %v", err)
	}
}

func TestStartAndClose(t *testing.T) {
	t.Parallel()
	gw, err := gateway.New(minimalConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(context.Background()); !errors.Is(err, gateway.ErrStarted) {
		t.Errorf("second Start = %v, want ErrStarted", err)
	}
	if err := gw.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}

	unstarted, err := gateway.New(minimalConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := unstarted.Close(); err != nil {
		t.Errorf("Close without Start = %v", err)
	}
}

// TestAdminTokenKeptInDataDir: without Config.Admin.Token the gateway makes
// one at first start in DataDir/admin-token (0600) and keeps it across
// restarts; a local process reaches the admin API as loopback, but cannot
// point a connection's base_url at its own listener without that token.
func TestAdminTokenKeptInDataDir(t *testing.T) {
	t.Parallel()
	cfg := minimalConfig(t)
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	path := filepath.Join(cfg.DataDir, gateway.AdminTokenFile)
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v, %v; want mode 0600", info, err)
	}
	tok, err := gateway.AdminToken(cfg.DataDir)
	if err != nil || len(tok) < 16 {
		t.Fatalf("AdminToken = %q, %v", tok, err)
	}
	// A second gateway on the DataDir keeps no nonces: the first holds
	// them.
	second := cfg
	second.InsecureForgetNoncesOnRestart = true
	again, err := gateway.New(second)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if tok2, _ := gateway.AdminToken(cfg.DataDir); tok2 != tok {
		t.Fatal("a second start made another token")
	}

	if _, err := gw.Vault().Create(context.Background(), &credvault.Connection{ID: "gh", BaseURL: "https://api.github.com",
		AuthMode: credvault.AuthBearer, AuthSecretKey: "t"}, map[string]string{"t": "ghp_stored_secret"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(openapicheck.Watch(t, gw))
	defer srv.Close()
	patch := func(token string) *http.Response {
		req, _ := http.NewRequest("PATCH", srv.URL+"/api/admin/connections/gh", strings.NewReader(`{"base_url":"http://127.0.0.1:9"}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := patch(""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("loopback PATCH of base_url without the token: %d, want 401", resp.StatusCode)
	}
	if c, _ := gw.Vault().Connection("gh"); c.BaseURL != "https://api.github.com" {
		t.Fatalf("base_url changed to %s without the token", c.BaseURL)
	}
	if resp := patch(tok); resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH of base_url with the data directory's token: %d", resp.StatusCode)
	}
}

// TestSettingsTableNamesConfigFields: every field docs/gateway.md maps a
// variable to exists in Config.
func TestSettingsTableNamesConfigFields(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## The same settings in Go")
	if !ok {
		t.Fatal("docs/gateway.md has no section \"The same settings in Go\"")
	}
	section, _, _ = strings.Cut(section, "\n#")
	rows := 0
	for line := range strings.Lines(section) {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		field := strings.TrimSpace(cells[2])
		if !strings.HasPrefix(field, "`") || strings.Contains(field, " ") {
			continue // the header
		}
		path := strings.Trim(field, "`")
		typ := reflect.TypeFor[gateway.Config]()
		for name := range strings.SplitSeq(path, ".") {
			f, ok := typ.FieldByName(name)
			if !ok {
				t.Errorf("docs/gateway.md maps %s to Config.%s, which does not exist", strings.TrimSpace(cells[1]), path)
				break
			}
			typ = f.Type
		}
		rows++
	}
	if rows < 40 {
		t.Errorf("found %d rows in the table, want every setting", rows)
	}
}
