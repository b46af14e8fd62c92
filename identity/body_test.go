package identity

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/httpsig"
)

// countingBody records how many body bytes anything read.
type countingBody struct {
	r    io.Reader
	read int
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func (c *countingBody) Close() error { return nil }

// No body byte is read before the signature over content-digest has
// verified, in either mode; in InsecureSkipBodyCheck mode none is read at
// all, and CheckBody applies the profile's body rules afterwards.
func TestBodyReadOnlyAfterSignature(t *testing.T) {
	const now = 1700000000
	alice, _ := FromKey("alice", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)), time.Unix(now-3600, 0))
	at := SignOptions{Created: time.Unix(now, 0)}
	const url = "http://127.0.0.1:38100/proxy/github/upload"
	const body = `{"a":1}`

	rows := []struct {
		name      string
		method    string
		signed    string // body under the signature
		sent      string // body on the wire
		chunked   bool
		tamper    func(h map[string][]string)
		skip      bool
		verifyErr error // from Verify
		readBytes bool  // Verify reads the body
		checkErr  error // from CheckBody (skip mode), given sent
	}{
		{name: "valid post reads the body after the signature", method: "POST", signed: body, sent: body, readBytes: true},
		{name: "forged signature leaves the body unread", method: "POST", signed: body, sent: body,
			tamper:    func(h map[string][]string) { h["Signature"] = []string{"sig1=:" + strings.Repeat("A", 86) + "==:"} },
			verifyErr: httpsig.ErrSignatureInvalid},
		{name: "foreign certificate leaves the body unread", method: "POST", signed: body, sent: body,
			tamper: func(h map[string][]string) { h["Idn-Agent-Cert"] = []string{"garbage"} }, verifyErr: httpsig.ErrIdentityInvalid},
		{name: "declared body under a bodiless signature is refused unread", method: "POST", signed: "", sent: body,
			verifyErr: httpsig.ErrComponentsInvalid},
		{name: "chunked body under a bodiless signature", method: "POST", signed: "", sent: body, chunked: true,
			readBytes: true, verifyErr: httpsig.ErrComponentsInvalid},
		{name: "tampered body", method: "POST", signed: body, sent: `{"a":2}`, readBytes: true, verifyErr: httpsig.ErrSignatureInvalid},
		{name: "skip mode reads nothing, then accepts the signed body", method: "POST", signed: body, sent: body, skip: true},
		{name: "skip mode: tampered body fails CheckBody", method: "POST", signed: body, sent: `{"a":2}`, skip: true,
			checkErr: httpsig.ErrSignatureInvalid},
		{name: "skip mode: chunked body smuggled under a bodiless signature", method: "POST", signed: "", sent: body,
			chunked: true, skip: true, checkErr: httpsig.ErrComponentsInvalid},
		{name: "skip mode: digest signed, no body sent", method: "POST", signed: body, sent: "", chunked: true, skip: true,
			checkErr: httpsig.ErrComponentsInvalid},
		{name: "skip mode: forged signature", method: "POST", signed: body, sent: body, skip: true,
			tamper:    func(h map[string][]string) { h["Signature"] = []string{"sig1=:" + strings.Repeat("A", 86) + "==:"} },
			verifyErr: httpsig.ErrSignatureInvalid},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := signed(t, alice, row.method, url, row.signed, at)
			cb := &countingBody{r: strings.NewReader(row.sent)}
			r.Body, r.ContentLength = cb, int64(len(row.sent))
			if row.chunked {
				r.ContentLength = -1
			}
			if row.tamper != nil {
				row.tamper(r.Header)
			}
			ver := &Verifier{Clock: fixedClock(now), Nonces: nonces(nil), InsecureSkipBodyCheck: row.skip}
			c, err := ver.Verify(r)
			if row.verifyErr == nil && err != nil || !errors.Is(err, row.verifyErr) {
				t.Fatalf("Verify = %v, want %v", err, row.verifyErr)
			}
			if (cb.read > 0) != row.readBytes {
				t.Fatalf("Verify read %d body bytes; want reading: %v", cb.read, row.readBytes)
			}
			if !row.skip || err != nil {
				return
			}
			got, _ := io.ReadAll(r.Body)
			if err := c.CheckBody(got); row.checkErr == nil && err != nil || !errors.Is(err, row.checkErr) {
				t.Fatalf("CheckBody = %v, want %v", err, row.checkErr)
			}
		})
	}
}
