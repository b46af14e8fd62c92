package httpsig

import (
	"errors"
	"net/http"
)

// Transport signs a clone of each outgoing request.
type Transport struct {
	Base   http.RoundTripper
	Signer *Signer
	Params func(r *http.Request, body []byte) (Params, error)
}

// RoundTrip signs a clone of r and sends it.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, errors.New("httpsig: not implemented yet")
}
