package admin

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/idnhq/idn/credvault"
)

func TestDisconnectAccount(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var revoked []string
	e := newEnv(t, func(c *Config) {
		c.RevokeAccount = func(_ context.Context, _ *credvault.Resolved, refresh string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			if refresh == "refresh-of-bob-failing" {
				return false, errors.New("revocation endpoint down")
			}
			revoked = append(revoked, refresh)
			return true, nil
		}
	})
	r := e.do("POST", "/api/admin/connections", `{"id":"drive","base_url":"https://www.googleapis.com","auth_mode":"oauth2_authorization_code",`+
		`"oauth_issuer":"https://accounts.google.com","oauth_client_id":"client","oauth_scopes":["openid"],"oauth_per_subject":true}`, withToken...)
	wantStatus(t, r, http.StatusCreated, "")
	ctx := context.Background()
	for subject, tok := range map[string]string{"alice": "refresh-of-alice", "bob": "refresh-of-bob-failing", "carol": "refresh-of-carol"} {
		if err := e.vault.ConnectAccount(ctx, "drive", subject, tok); err != nil {
			t.Fatal(err)
		}
	}
	c := e.do("GET", "/api/admin/connections/drive", "")
	if !strings.Contains(string(c.Body), `"oauth_accounts":[{"subject":"alice","status":"connected"`) {
		t.Fatalf("connection = %s", c.Body)
	}

	r = e.do("DELETE", "/api/admin/connections/drive/accounts?subject=alice", "")
	wantStatus(t, r, http.StatusOK, "")
	if got := r.json(t); got["revoked_at_provider"] != true || got["subject"] != "alice" {
		t.Fatalf("disconnect = %s", r.Body)
	}
	// A failed revocation still forgets the account; the log says why,
	// never with the token.
	r = e.do("DELETE", "/api/admin/connections/drive/accounts?subject=bob", "")
	if wantStatus(t, r, http.StatusOK, ""); r.json(t)["revoked_at_provider"] != false {
		t.Fatalf("disconnect = %s", r.Body)
	}
	wantStatus(t, e.do("DELETE", "/api/admin/connections/drive/accounts?subject=alice", ""), http.StatusNotFound, "NOT_FOUND")
	wantStatus(t, e.do("DELETE", "/api/admin/connections/nope/accounts", ""), http.StatusNotFound, "CONNECTION_NOT_FOUND")

	// Deleting the connection revokes the accounts left.
	wantStatus(t, e.do("DELETE", "/api/admin/connections/drive", "", withToken...), http.StatusNoContent, "")
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(revoked, ",") != "refresh-of-alice,refresh-of-carol" {
		t.Fatalf("revoked %v", revoked)
	}
	e.assertNoSecrets("refresh-of-alice", "refresh-of-bob-failing", "refresh-of-carol")
}

func TestDisconnectAccountOfAStaticConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	wantStatus(t, e.do("POST", "/api/admin/connections", `{"id":"gh","base_url":"https://api.github.com","auth_mode":"bearer",`+
		`"auth_secret_key":"t","secrets":{"t":"static-secret-1"}}`, withToken...), http.StatusCreated, "")
	wantStatus(t, e.do("DELETE", "/api/admin/connections/gh/accounts", ""), http.StatusBadRequest, "VALIDATION_ERROR")
}
