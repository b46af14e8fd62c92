// Command embedcp runs an idn control plane inside an existing net/http
// server, with its API and owner dashboard under /idn/ beside the
// application's own routes, on an SQLite file in ./embedcp-data. It sets up
// one owner without HTTP (Provision) and prints a one-time link that opens
// the dashboard as that owner.
package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/idnhq/idn/controlplane"
)

const addr = "localhost:8080"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	store, err := controlplane.Open(ctx, controlplane.StoreConfig{SQLitePath: "embedcp-data/controlplane.db"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	cp, err := newControlPlane(store, "http://"+addr)
	if err != nil {
		log.Fatal(err)
	}
	if err := cp.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer cp.Close()
	if _, err := cp.Provision(ctx, "acme", controlplane.ServiceSpec{Slug: "weather", Name: "Weather"}); err != nil {
		log.Fatal(err)
	}
	link, _, err := cp.SigninLink(ctx, "acme", "/signin")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("the dashboard of acme: http://%s%s\n", addr, link)
	srv := &http.Server{Addr: addr, Handler: newMux(cp), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

// newControlPlane is the control plane of the application served at
// origin, mounted under /idn.
func newControlPlane(store *controlplane.Store, origin string) (*controlplane.Server, error) {
	secret := make([]byte, 32)
	rand.Read(secret)
	return controlplane.New(controlplane.Config{
		Store:     store,
		JWTSecret: secret, // a fresh one logs every owner out on restart
		BasePath:  "/idn",
		PublicURL: origin,
		// Browsers treat http://localhost as secure: passkeys work there,
		// and the session cookie may drop Secure.
		AllowedOrigins:          []string{origin},
		Auth:                    controlplane.AuthConfig{Origins: []string{origin}},
		InsecureLocalhostCookie: true,
		SigninLinks:             true,
	})
}

// newMux is the existing application, with the control plane under /idn/.
func newMux(cp http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "the existing application") })
	mux.Handle("/idn/", cp)
	return mux
}
