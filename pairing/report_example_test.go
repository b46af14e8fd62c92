package pairing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing"
	"github.com/idnhq/idn/pairing/pairwire"
)

// A gateway reports a decision to its owner's control plane, which sees
// the route template, never the request's ids or query.
func ExampleReporter() {
	got := make(chan pairwire.Activity, 1)
	controlPlane := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b pairwire.ActivityBatch
		json.NewDecoder(r.Body).Decode(&b)
		for _, a := range b.Records {
			got <- a
		}
		w.Write([]byte(`{"accepted":1}`))
	}))
	defer controlPlane.Close()

	id, err := identity.New("gateway") // the gateway's own identity, the key the pairing bound
	if err != nil {
		log.Fatal(err)
	}
	r, err := pairing.NewReporter(pairing.ReporterConfig{ControlPlaneURL: controlPlane.URL, Identity: id, Interval: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)

	r.Record(pairing.Activity{At: time.Now(), AgentName: "weather-bot", Connection: "github", Method: "GET",
		Route: "/repos/octo/{id}", Allowed: true, Status: 200})
	a := <-got
	fmt.Println(a.AgentName, a.Method, a.Route, a.Decision, a.Status)
	// Output: weather-bot GET /repos/octo/{id} allow 200
}
