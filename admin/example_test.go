package admin_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
)

// The gateway mounts the admin API on its mux behind the access policy.
func ExampleNew() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "admin")
	defer os.RemoveAll(dir)
	key, _ := credvault.GenerateMasterKey()
	st, _ := sqlitestore.Open(ctx, filepath.Join(dir, sqlitestore.DefaultFileName))
	defer st.Close()
	vault, _ := credvault.New(ctx, credvault.Config{Store: st, MasterKey: key})
	defer vault.Close()

	access, err := admin.NewAccess(admin.AccessConfig{AccessOptions: admin.AccessOptions{Mode: admin.AccessToken, Token: "example-admin-token-123456"}})
	if err != nil {
		log.Fatal(err)
	}
	h, err := admin.New(admin.Config{
		Vault:       vault,
		Access:      access,
		CatalogFile: filepath.Join(dir, "service-catalog.json"),
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/admin/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	req, _ := http.NewRequest("POST", srv.URL+"/api/admin/connections", strings.NewReader(
		`{"id":"openai","base_url":"https://api.openai.com","auth_mode":"bearer","auth_secret_key":"api_key","secrets":{"api_key":"sk-example"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer example-admin-token-123456")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, strings.Contains(string(body), `"credential_keys":["api_key"]`), strings.Contains(string(body), "sk-example"))
	// Output: 201 true false
}

// Access.Wrap is middleware: the gateway puts /metrics behind the same
// policy as the admin API. A loopback peer is admitted only when it also
// addressed a loopback Host: a page whose name was rebound to 127.0.0.1
// still sends its own name.
func ExampleAccess_Wrap() {
	access, _ := admin.NewAccess(admin.AccessConfig{AccessOptions: admin.AccessOptions{Mode: admin.AccessLoopback}})
	metrics := access.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "idn_gateway_requests_in_flight 0\n")
	}))
	for _, c := range []struct{ peer, host string }{
		{"127.0.0.1:4000", "127.0.0.1:38100"},
		{"203.0.113.9:4000", "127.0.0.1:38100"},
		{"127.0.0.1:4000", "rebind.evil.example:38100"},
	} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.RemoteAddr, req.Host = c.peer, c.host
		rec := httptest.NewRecorder()
		metrics.ServeHTTP(rec, req)
		fmt.Println(c.peer, c.host, rec.Code)
	}
	// Output:
	// 127.0.0.1:4000 127.0.0.1:38100 200
	// 203.0.113.9:4000 127.0.0.1:38100 403
	// 127.0.0.1:4000 rebind.evil.example:38100 403
}

// A loopback client may not point a connection elsewhere without the
// admin token; the pairing client calls the admin API in process with
// the owner's context, which may.
func ExampleOwnerContext() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "admin")
	defer os.RemoveAll(dir)
	key, _ := credvault.GenerateMasterKey()
	st, _ := sqlitestore.Open(ctx, filepath.Join(dir, sqlitestore.DefaultFileName))
	defer st.Close()
	vault, _ := credvault.New(ctx, credvault.Config{Store: st, MasterKey: key})
	defer vault.Close()
	_, _ = vault.Create(ctx, &credvault.Connection{ID: "gh", BaseURL: "https://api.github.com", AuthMode: credvault.AuthBearer,
		AuthSecretKey: "token"}, map[string]string{"token": "ghp_example_token"})
	access, _ := admin.NewAccess(admin.AccessConfig{AccessOptions: admin.AccessOptions{Mode: admin.AccessLoopback}})
	h, _ := admin.New(admin.Config{Vault: vault, Access: access})

	for _, asOwner := range []bool{false, true} {
		reqCtx := ctx
		if asOwner {
			reqCtx = admin.OwnerContext(ctx)
		}
		req := httptest.NewRequestWithContext(reqCtx, "PATCH", "/api/admin/connections/gh", strings.NewReader(`{"base_url":"https://ghe.example.com/api/v3"}`))
		req.Host, req.RemoteAddr = "localhost", "127.0.0.1:50000"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println("owner:", asOwner, rec.Code)
	}
	// Output:
	// owner: false 401
	// owner: true 200
}
