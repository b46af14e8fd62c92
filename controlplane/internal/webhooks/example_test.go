package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/controlplane/internal/webhooks"
)

// ExampleManager registers a webhook for acme's service, asks for a test
// event and makes one pass of the worker, which delivers it.
func ExampleManager() {
	dir, _ := os.MkdirTemp("", "webhooks")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqldb.Open(ctx, sqldb.Config{SQLitePath: filepath.Join(dir, "cp.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	// The service the rest of the control plane would have made.
	now := sqldb.Micros(time.Now())
	for _, q := range []string{
		`INSERT INTO accounts (id, created_at) VALUES ('usr_acme', $1)`,
		`INSERT INTO namespaces (namespace, owner_id, created_at, updated_at) VALUES ('acme', 'usr_acme', $1, $1)`,
		`INSERT INTO services (id, slug, name, service_endpoint, owner, created_at, updated_at)
			VALUES ('svc_github', 'github', 'GitHub', 'https://github.example', 'acme', $1, $1)`,
	} {
		if _, err := db.Exec(ctx, q, now); err != nil {
			fmt.Println(err)
			return
		}
	}
	m, err := webhooks.New(webhooks.Config{SecretKey: []byte("example-webhook-key-of-32-bytes!"), InsecureAllowPrivateTargets: true},
		webhooks.Deps{DB: db, Kit: &web.Kit{Log: slog.New(slog.DiscardHandler), Clock: time.Now, MaxBodyBytes: 1 << 20},
			// The composition's owner sessions; here every request is acme's.
			Owner: func(next web.OwnerHandler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next(w, r, "acme") })
			}})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	m.Routes(mux)
	api := httptest.NewServer(mux)
	defer api.Close()

	received := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		received <- r.Header.Get("webhook-signature")[:3] + " " + string(body[:strings.Index(string(body), ",")])
	}))
	defer receiver.Close()

	res, _ := http.Post(api.URL+"/v1/services/svc_github/webhooks", "application/json", strings.NewReader(`{"url":"`+receiver.URL+`"}`))
	var created struct{ ID string }
	err = json.NewDecoder(res.Body).Decode(&created)
	res.Body.Close()
	fmt.Println("created:", res.StatusCode, err)
	res, _ = http.Post(api.URL+"/v1/services/svc_github/webhooks/"+created.ID+"/test", "", nil)
	res.Body.Close()
	fmt.Println("test queued:", res.StatusCode)
	n, err := m.DeliverDue(ctx)
	fmt.Println("delivered:", n, err)
	fmt.Println("received:", <-received)
	// Output:
	// created: 201 <nil>
	// test queued: 202
	// delivered: 1 <nil>
	// received: v1, {"type":"webhook.test"
}
