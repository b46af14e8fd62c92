package pairing_test

import (
	"context"
	"log"
	"log/slog"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/pairing"
)

// A gateway process that completes a pairing shown in the dashboard and
// then serves the owner's requests on its store, as `gateway pair` does.
// The gateway is not started: only its admin API and identity are used,
// beside a `gateway serve` on the same data directory.
func Example() {
	key, _ := credvault.GenerateMasterKey() // the gateway's GATEWAY_MASTER_KEY
	gw, err := gateway.New(gateway.Config{DataDir: "/var/lib/idn-gateway", MasterKey: key, ControlPlaneURL: "https://idn.example"})
	if err != nil {
		log.Fatal(err)
	}
	defer gw.Close()
	c, err := pairing.New(pairing.Config{ControlPlaneURL: "https://idn.example", Identity: gw.Identity(), Admin: gw.Admin(),
		DataDir: "/var/lib/idn-gateway", MasterKey: key, Name: "laptop", Logger: slog.Default()})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("compare with the dashboard: %s", c.Fingerprint())
	err = c.Run(context.Background(), &pairing.Pairing{SessionID: "gps_…", Code: "ABCD1234", Namespace: "alice"})
	log.Print(err) // nil when the context ends; ErrUnpaired once the owner unpairs
}
