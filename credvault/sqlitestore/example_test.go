package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
)

// The gateway opens the store file in its data directory; a Vault on it
// seals each secret before it reaches the file.
func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "vault")
	defer os.RemoveAll(dir)

	st, err := sqlitestore.Open(ctx, filepath.Join(dir, sqlitestore.DefaultFileName))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	key, _ := credvault.GenerateMasterKey()
	v, err := credvault.New(ctx, credvault.Config{Store: st, MasterKey: key})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Create(ctx, &credvault.Connection{
		ID: "github", BaseURL: "https://api.github.com",
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token",
	}, map[string]string{"token": "ghp_example"}); err != nil {
		log.Fatal(err)
	}
	r, _ := v.Lookup("github")
	fmt.Println(r.Connection.ID, r.Connection.SecretVersion)
	// Output: github 1
}
