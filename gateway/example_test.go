package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
)

// A gateway mounted under /idn/ of an existing server. The agent signs the
// URL it calls, prefix included.
func ExampleNew() {
	agent, _ := identity.New("alice")

	// The upstream API, which wants a bearer token the agent never sees.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer upstream-token" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "sunny")
	}))
	defer upstream.Close()
	// A stand-in for the control plane's claims API: alice's agent is
	// approved for the service "weather".
	controlPlane := claimcachetest.NewServer()
	defer controlPlane.Close()
	controlPlane.Approve(claimcache.Claim{Namespace: "alice", Service: "weather", PublicKey: agent.PublicKeyString()})

	dir, _ := os.MkdirTemp("", "gateway-example")
	defer os.RemoveAll(dir)
	key, _ := credvault.GenerateMasterKey()
	gw, err := gateway.New(gateway.Config{
		DataDir:         dir,
		MasterKey:       key,
		ControlPlaneURL: controlPlane.URL,
		ServiceAPIKey:   controlPlane.APIKey("weather"),
	})
	if err != nil {
		panic(err)
	}
	defer gw.Close()
	ctx := context.Background()
	_, err = gw.Vault().Create(ctx, &credvault.Connection{ID: "weather", BaseURL: upstream.URL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, map[string]string{"token": "upstream-token"})
	if err != nil {
		panic(err)
	}
	if err := gw.Start(ctx); err != nil {
		panic(err)
	}
	// The first claims poll runs on the gateway's own schedule.
	if err := gw.Up(ctx); err != nil {
		panic(err)
	}

	mux := http.NewServeMux()
	mux.Handle("/idn/", http.StripPrefix("/idn", gw))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	client := &http.Client{Transport: agent.Transport(nil, identity.SignOptions{})}
	resp, err := client.Get(srv.URL + "/idn/proxy/weather/forecast")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// 200 sunny
}

// Without Config.Admin.Token the gateway keeps its admin token in the data
// directory, made at first start; a local tool reads it from there.
func ExampleAdminToken() {
	dir, _ := os.MkdirTemp("", "gateway")
	defer os.RemoveAll(dir)
	first, _ := gateway.AdminToken(dir)
	again, _ := gateway.AdminToken(dir)
	info, _ := os.Stat(filepath.Join(dir, gateway.AdminTokenFile))
	fmt.Println(len(first), first == again, info.Mode().Perm())
	// Output: 64 true -rw-------
}
