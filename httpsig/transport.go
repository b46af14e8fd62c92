package httpsig

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"time"
)

// Transport is an http.RoundTripper that signs a clone of each outgoing
// request and sends the clone; the caller's request is never modified.
//
// It never signs a request an http.Client built to follow a redirect
// (one whose Response field is set): it fails it with ErrRedirectRefused.
// Signing each hop would hand whoever answers a 3xx a valid signed
// request for any URL it names, ready to replay where the signer is
// trusted. A client that wants the 3xx itself sets
// CheckRedirect to return http.ErrUseLastResponse.
type Transport struct {
	// Base sends the signed requests. nil: http.DefaultTransport.
	Base http.RoundTripper
	// Signer signs the requests. Required.
	Signer *Signer
	// Params returns the parameters for one outgoing request. It gets the
	// clone (and may set headers on it) and the buffered body. A non-empty
	// body already carries Content-Digest (sha-256) unless the caller set
	// one. nil: cover "@method", "@target-uri" and, with a body,
	// "content-digest", with created = now and a random 128-bit nonce.
	Params func(r *http.Request, body []byte) (Params, error)
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip signs a clone of r and sends it with t.Base.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Response != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, ErrRedirectRefused
	}
	body, err := drain(r)
	if err != nil {
		return nil, err
	}
	if t.Signer == nil {
		return nil, errors.New("httpsig: Transport.Signer is nil")
	}
	clone := r.Clone(r.Context())
	switch {
	case body == nil:
	case len(body) == 0:
		clone.Body, clone.GetBody, clone.ContentLength = http.NoBody, nil, 0
	default:
		clone.Body = io.NopCloser(bytes.NewReader(body))
		clone.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		clone.ContentLength = int64(len(body))
	}
	if len(body) > 0 && len(fieldLines(clone.Header, "content-digest")) == 0 {
		d, _ := ContentDigest(DigestSHA256, body)
		clone.Header.Set("Content-Digest", d)
	}
	paramsFn := t.Params
	if paramsFn == nil {
		paramsFn = defaultTransportParams
	}
	p, err := paramsFn(clone, body)
	if err != nil {
		return nil, err
	}
	if err := t.Signer.SignRequest(clone, p); err != nil {
		return nil, err
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(clone)
}

// drain reads and closes r.Body, as a RoundTripper must close it even on
// error.
func drain(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, errors.New("httpsig: reading the request body: " + err.Error())
	}
	return b, nil
}

func defaultTransportParams(r *http.Request, body []byte) (Params, error) {
	var n [16]byte
	rand.Read(n[:])
	p := Params{
		Components: []Component{{Name: "@method"}, {Name: "@target-uri"}},
		Created:    time.Now(),
		Nonce:      base64.RawURLEncoding.EncodeToString(n[:]),
	}
	if len(body) > 0 {
		p.Components = append(p.Components, Component{Name: "content-digest"})
	}
	return p, nil
}
