// Command embed mounts a complete idn gateway under /idn/ of an existing
// net/http server; agents sign the URL they call, prefix included. It reads
// GATEWAY_DATA_DIR, GATEWAY_MASTER_KEY, IDN_REGISTRY_URL and
// IDN_SERVICE_API_KEY as `gateway serve` does.
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
)

func main() {
	key, err := credvault.ParseMasterKey(os.Getenv("GATEWAY_MASTER_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{DataDir: os.Getenv("GATEWAY_DATA_DIR"), MasterKey: key, Logger: slog.Default(),
		ControlPlaneURL: os.Getenv("IDN_REGISTRY_URL"), ServiceAPIKey: os.Getenv("IDN_SERVICE_API_KEY")})
	if err == nil {
		err = gw.Start(context.Background())
	}
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", newMux(gw)))
}

// newMux is the existing application, with the gateway under /idn/.
func newMux(gw *gateway.Gateway) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "the existing application") })
	mux.Handle("/idn/", http.StripPrefix("/idn", gw))
	return mux
}
