package identity_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idnhq/idn/identity"
)

// A server that must not buffer bodies for callers it has not admitted
// verifies the headers first, runs its own checks, and only then reads the
// body and checks it against the signed content-digest.
func ExampleCaller_CheckBody() {
	verifier := &identity.Verifier{Nonces: mustReplay(), InsecureSkipBodyCheck: true}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, err := verifier.Verify(r) // reads no body byte
		if err != nil {
			refuse(w, err)
			return
		}
		// ... admit or refuse the caller here, still without the body ...
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err == nil {
			err = caller.CheckBody(body)
		}
		if err != nil {
			refuse(w, err)
			return
		}
		fmt.Fprintf(w, "%s sent %s", caller.Namespace, body)
	}))
	defer server.Close()

	agent, _ := identity.New("acme-bot")
	client := &http.Client{Transport: agent.Transport(nil, identity.SignOptions{})}
	resp, err := client.Post(server.URL+"/v1/things", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(answer))
	// Output: 200 acme-bot sent {"a":1}
}
