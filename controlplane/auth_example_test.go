package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/idnhq/idn/controlplane"
)

// ExampleAuthConfig enables passkey accounts for a dashboard at
// https://dash.example and starts a signup: the answer is the standard
// PublicKeyCredentialCreationOptions JSON that the browser hands to
// navigator.credentials.create (after PublicKeyCredential.parseCreationOptionsFromJSON).
func ExampleAuthConfig() {
	dir, _ := os.MkdirTemp("", "controlplane-auth")
	defer os.RemoveAll(dir)
	store, _ := controlplane.Open(context.Background(), controlplane.StoreConfig{SQLitePath: filepath.Join(dir, "cp.db")})
	defer store.Close()
	api, err := controlplane.New(controlplane.Config{
		Store:          store,
		JWTSecret:      []byte("example-secret-of-at-least-32-bytes!"),
		AllowedOrigins: []string{"https://dash.example"},
		Auth:           controlplane.AuthConfig{Origins: []string{"https://dash.example"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ts := httptest.NewServer(api)
	defer ts.Close()

	res, err := http.Get(ts.URL + "/v1/auth/signup/options?namespace=acme")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	var opts struct {
		RP     struct{ ID string }
		User   struct{ Name string }
		Params []struct{ Alg int } `json:"pubKeyCredParams"`
	}
	json.NewDecoder(res.Body).Decode(&opts)
	fmt.Println(res.StatusCode, opts.RP.ID, opts.User.Name, opts.Params)
	// Output: 200 dash.example acme [{-7} {-8} {-257}]
}
