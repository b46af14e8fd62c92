package identity_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/replay"
)

// An agent signs its requests with an http.Client whose transport is the
// identity's; a server verifies them with a Verifier.
func Example() {
	verifier := &identity.Verifier{Nonces: mustReplay()}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, err := verifier.Verify(r)
		if err != nil {
			refuse(w, err)
			return
		}
		fmt.Fprintf(w, "hello %s (subject %s)", caller.Namespace, caller.Subject)
	}))
	defer server.Close()

	agent, err := identity.New("acme-bot")
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: agent.Transport(nil, identity.SignOptions{Subject: "user-42"})}
	resp, err := client.Post(server.URL+"/v1/things", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 hello acme-bot (subject user-42)
}

// Identities are kept under a home folder, one record per namespace.
func ExampleIdentity_Save() {
	home, _ := os.MkdirTemp("", "idn-home")
	defer os.RemoveAll(home)
	id, _ := identity.New("acme-bot")
	if err := id.Save(home); err != nil {
		panic(err)
	}
	loaded, err := identity.Load(home, "acme-bot")
	if err != nil {
		panic(err)
	}
	names, _ := identity.List(home)
	fmt.Println(loaded.DID(), loaded.KeyID() == id.KeyID(), names)
	// Output: did:idn:acme-bot true [acme-bot]
}

// Sign adds the profile's headers to a request in place.
func ExampleIdentity_Sign() {
	id, _ := identity.New("acme-bot")
	r, _ := http.NewRequest("GET", "http://127.0.0.1:38100/proxy/github/user", nil)
	if err := id.Sign(r, identity.SignOptions{}); err != nil {
		panic(err)
	}
	for _, h := range []string{"Idn-Namespace", "Idn-Subject", "Signature-Input"} {
		v := r.Header.Get(h)
		if h == "Signature-Input" {
			v = v[:strings.Index(v, ";")]
		}
		fmt.Printf("%s: %s\n", h, v)
	}
	// Output:
	// Idn-Namespace: acme-bot
	// Idn-Subject: acme-bot
	// Signature-Input: sig1=("@method" "@target-uri" "idn-namespace" "idn-subject" "idn-agent-key" "idn-agent-cert")
}

func ExampleParseDID() {
	d, err := identity.ParseDID("did:idn:acme:github#bot#user-42")
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Namespace, d.Service, d.Agent, d.Subject)
	// Output: acme github bot user-42
}

func mustReplay() *replay.Store {
	s, err := replay.New(replay.Config{})
	if err != nil {
		panic(err)
	}
	return s
}

// refuse answers a failed verification with its code and status.
func refuse(w http.ResponseWriter, err error) {
	code, _ := identity.AuthCode(err) // INTERNAL_ERROR when err wraps no sentinel
	http.Error(w, code.String(), code.Status())
}

// AuthCode maps a verification failure to the code a server answers with.
func ExampleAuthCode() {
	verifier := &identity.Verifier{Nonces: mustReplay()}
	agent, _ := identity.New("acme-bot")
	r, _ := http.NewRequest("GET", "http://127.0.0.1:38100/proxy/github/user", nil)
	_ = agent.Sign(r, identity.SignOptions{})
	if _, err := verifier.Verify(r); err != nil {
		panic(err)
	}
	_, err := verifier.Verify(r) // the same request again: a replay
	if code, ok := identity.AuthCode(err); ok {
		fmt.Println(code, code.Status())
	}
	// Output: AUTH_REPLAY_DETECTED 403
}

// An agent with a display name: the verifier hands the name, which the
// signature covers, to the server (a gateway files it with the claim the
// owner approves). Rename gives the same key a new name.
func ExampleNewNamed() {
	verifier := &identity.Verifier{Nonces: mustReplay()}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, err := verifier.Verify(r)
		if err != nil {
			refuse(w, err)
			return
		}
		fmt.Fprintf(w, "%s asks, named %q", caller.Namespace, caller.Name)
	}))
	defer server.Close()

	agent, err := identity.NewNamed("acme-bot", "Invoice bot")
	if err != nil {
		panic(err)
	}
	get := func() string {
		resp, err := (&http.Client{Transport: agent.Transport(nil, identity.SignOptions{})}).Get(server.URL)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	fmt.Println(get())
	if err := agent.Rename("Billing bot", time.Now()); err != nil {
		panic(err)
	}
	fmt.Println(get())
	// Output:
	// acme-bot asks, named "Invoice bot"
	// acme-bot asks, named "Billing bot"
}
