package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idnhq/idn/approval"
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

// A gateway's approval.Gate keeps its holds in the store file
// (approval.Config.Store), so the gateway finds them after a restart.
func ExampleStore_Holds() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "holds")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, sqlitestore.DefaultFileName)
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		log.Fatal(err)
	}
	binding, salt, now := strings.Repeat("ab", 32), []byte("a random salt"), time.Now()
	held := &approval.Hold{Binding: binding, ID: approval.ActionID(salt, binding), Salt: salt,
		Digest: strings.Repeat("cd", 32), ExpiresAt: now.Add(10 * time.Minute)}
	if _, err := st.Holds().Add(ctx, held, now); err != nil {
		log.Fatal(err)
	}
	st.Close()

	st, err = sqlitestore.Open(ctx, path) // the gateway restarted
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	h, err := st.Holds().Hold(ctx, binding)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(h.ID == held.ID, h.Live(now))
	// Output: true true
}
