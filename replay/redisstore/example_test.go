package redisstore_test

import (
	"context"
	"log"
	"os"

	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/replay/redisstore"
)

// Every replica of a fleet opens the same Redis and hands the store to
// its gateway: a nonce accepted by one is refused by all. (Not run: it
// needs a Redis; TestFleetRefusesReplays runs the same on a real one.)
func ExampleNew() {
	ctx := context.Background()
	nonces, err := redisstore.New(ctx, redisstore.Config{URL: os.Getenv("GATEWAY_REDIS_URL")})
	if err != nil {
		log.Fatal(err)
	}
	defer nonces.Close()
	gw, err := gateway.New(gateway.Config{
		DataDir:         "/var/lib/idn-gateway",
		ControlPlaneURL: "https://idn.example",
		NonceStore:      nonces,
		// MasterKey, and the rest of the replica's settings.
	})
	if err != nil {
		log.Fatal(err)
	}
	defer gw.Close()
}
