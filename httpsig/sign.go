package httpsig

import (
	"errors"
	"net/http"
)

// Signer signs messages with one key. The zero value is not usable: Key is
// required.
type Signer struct {
	Key   SigningKey // required
	Label string     // "" means "sig1"
	// LowercaseMethod signs "@method" lower-cased. NOT RFC 9421 (§2.2.1
	// says as sent); the idn-rfc9421-v1 profile opts in to it.
	LowercaseMethod bool
}

// SignRequest signs r.
func (s *Signer) SignRequest(r *http.Request, p Params) error {
	return errors.New("httpsig: not implemented yet")
}

// SignResponse signs resp.
func (s *Signer) SignResponse(resp *http.Response, req *http.Request, p Params) error {
	return errors.New("httpsig: not implemented yet")
}
