package upstreamauth

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/idnhq/idn/credvault"
)

// An agent naming ever new subjects costs no memory: a subject without an
// account is refused before any entry is made for it.
func TestUnknownSubjectsKeepNoState(t *testing.T) {
	ctx := context.Background()
	key, _ := credvault.GenerateMasterKey()
	v, err := credvault.New(ctx, credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Create(ctx, &credvault.Connection{ID: "drive", BaseURL: "https://www.googleapis.com", AuthMode: credvault.AuthOAuth2AuthorizationCode,
		OAuthAuthURL: "https://auth.example.com/a", OAuthTokenURL: "https://auth.example.com/t", OAuthClientID: "c", OAuthPerSubject: true}, nil); err != nil {
		t.Fatal(err)
	}
	tokens, _ := New(Config{Vault: v})
	res, _ := v.Lookup("drive")
	for i := range 1000 {
		if _, err := tokens.Token(ctx, res, "subject-"+strconv.Itoa(i)); !errors.Is(err, ErrAuthRequired) {
			t.Fatalf("Token = %v", err)
		}
	}
	if n := len(tokens.entries); n != 0 {
		t.Fatalf("%d entries kept for subjects without an account", n)
	}
}
