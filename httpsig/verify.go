package httpsig

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// Verifier checks HTTP message signatures (RFC 9421 §3.2). Its zero value
// rejects everything: Keys and Nonces (or InsecureSkipNonceCheck) must be
// set. A Verifier is safe for concurrent use once configured.
type Verifier struct {
	// Keys resolves the verifying key. nil: every signature is rejected.
	Keys KeyResolver
	// Nonces records nonces for replay protection, with scope = keyid.
	// nil: every signature is rejected, unless InsecureSkipNonceCheck.
	Nonces NonceChecker
	// InsecureSkipNonceCheck accepts signatures without recording their
	// nonce, and without requiring one; the caller must do replay
	// protection itself (the idn gateway records the nonce after its claim
	// check, using Verified.NonceUntil).
	InsecureSkipNonceCheck bool
	// Clock returns the current time. nil: time.Now.
	Clock func() time.Time
	// MaxAge bounds the signature age. zero: 5 minutes. `created` is
	// required; a signature created before now-MaxAge is rejected.
	MaxAge time.Duration
	// FutureSkew bounds clock skew. zero: 30 seconds. A signature created
	// after now+FutureSkew is rejected. `expires`, when present, is honoured.
	FutureSkew time.Duration
	// Label selects the signature. "": the message must carry exactly one
	// signature; else the signature with this label is verified and others
	// are ignored.
	Label string
	// Required components must all be covered, in any order; a missing one
	// gives ErrComponentsInvalid. nil: no requirement.
	Required []Component
	// AcceptLowercaseMethod also accepts a signature made over the
	// lower-cased method (the idn-rfc9421-v1 profile). It is tried first
	// when the method is not already lower-case; the exact form is tried
	// if it fails. false: RFC 9421 only.
	AcceptLowercaseMethod bool
	// Origin returns the scheme and authority of the target URI of a
	// received request (for example from trusted proxy headers). nil:
	// "https" if r.TLS != nil else "http", and r.Host. A request-target in
	// absolute form contributes only its path and query: the scheme and
	// authority it names never reach the signature base.
	Origin func(r *http.Request) (scheme, authority string)
	// MaxBodyBytes bounds the body read to check a covered content-digest.
	// zero: 8 MiB. When content-digest is covered the body is read, checked
	// (RFC 9530) and restored for later readers, after the signature over
	// the field has verified.
	MaxBodyBytes int64
	// InsecureSkipContentDigest verifies a covered content-digest as a
	// signed field but reads no body byte and does not compare the two: the
	// caller must check the body with VerifyContentDigest before using it.
	// A server sets it to read bodies only from callers it has admitted.
	InsecureSkipContentDigest bool
	// ErrorHandler answers requests that Middleware rejects. nil: a plain
	// text answer naming the sentinel the error wraps, status 403 (413 for
	// ErrBodyTooLarge, 500 for an error that wraps no sentinel).
	ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)
}

// maxComponents bounds the covered components of a received signature: the
// base is built before the signature can be checked, so an unauthenticated
// sender must not be able to make that work (and the duplicate check)
// arbitrarily large. RFC 9421 sets no limit; real profiles use a handful.
const maxComponents = 64

const (
	defaultMaxAge       = 5 * time.Minute
	defaultFutureSkew   = 30 * time.Second
	defaultMaxBodyBytes = 8 << 20
)

// VerifyRequest verifies the signature of a request received by a server
// (or of a client request, when RequestURI is empty). On success the body
// is still readable.
func (v *Verifier) VerifyRequest(r *http.Request) (*Verified, error) {
	m := requestMessage(r, v.Origin)
	return v.verify(r.Context(), m, r.Header, func(max int64) ([]byte, error) {
		return ReadBody(r, max)
	})
}

// VerifyResponse verifies the signature of resp. req is the request resp
// answers; it may be nil unless a covered component carries ;req. On
// success the body is still readable.
func (v *Verifier) VerifyResponse(resp *http.Response, req *http.Request) (*Verified, error) {
	var rm *message
	ctx := context.Background()
	if req != nil {
		rm = requestMessage(req, v.Origin)
		ctx = req.Context()
	}
	m := responseMessage(resp, rm)
	return v.verify(ctx, m, resp.Header, func(max int64) ([]byte, error) {
		return readAndRestore(&resp.Body, resp.ContentLength, max)
	})
}

// signatureInput is the parsed Signature-Input member of one signature.
type signatureInput struct {
	label string
	list  httpsfv.InnerList
	sig   []byte
}

func (v *Verifier) verify(ctx context.Context, m *message, h http.Header, body func(int64) ([]byte, error)) (*Verified, error) {
	in, err := v.selectSignature(h)
	if err != nil {
		return nil, err
	}
	ver := &Verified{Label: in.label}
	p := &ver.Params
	if err := parseSignatureParams(in.list, m.response, p); err != nil {
		return nil, err
	}
	for i := range v.Required {
		if !covers(p.Components, &v.Required[i]) {
			return nil, newError(ErrComponentsInvalid, "required component "+quoteForError(v.Required[i].Name)+" is not covered")
		}
	}

	now := time.Now
	if v.Clock != nil {
		now = v.Clock
	}
	t := now()
	maxAge, skew := cmp.Or(v.MaxAge, defaultMaxAge), cmp.Or(v.FutureSkew, defaultFutureSkew)
	switch {
	case p.Created.IsZero():
		return nil, newError(ErrSignatureInvalid, "created parameter is missing")
	case p.Created.Before(t.Add(-maxAge)):
		return nil, newError(ErrSignatureInvalid, "signature is too old")
	case p.Created.After(t.Add(skew)):
		return nil, newError(ErrSignatureInvalid, "signature is created in the future")
	case !p.Expires.IsZero() && t.After(p.Expires):
		return nil, newError(ErrSignatureInvalid, "signature has expired")
	}
	ver.NonceUntil = p.Created.Add(maxAge)
	if !p.Expires.IsZero() && p.Expires.Before(ver.NonceUntil) {
		ver.NonceUntil = p.Expires
	}

	if !v.InsecureSkipNonceCheck {
		if v.Nonces == nil {
			return nil, newError(ErrNonceInvalid, "no NonceChecker configured")
		}
		if p.Nonce == "" {
			return nil, newError(ErrNonceInvalid, "nonce parameter is missing")
		}
	}

	if v.Keys == nil {
		return nil, newError(ErrIdentityInvalid, "no KeyResolver configured")
	}
	key, err := v.Keys.ResolveKey(ctx, h, p)
	if err != nil {
		if kindOf(err) != nil {
			return nil, err
		}
		return nil, wrapError(ErrIdentityInvalid, "key resolution failed", err)
	}
	if key == nil {
		return nil, newError(ErrIdentityInvalid, "key resolution returned no key")
	}
	if p.Alg != "" && p.Alg != key.Algorithm() {
		return nil, newError(ErrSignatureInvalid, "alg "+quoteForError(p.Alg)+" does not match the key")
	}
	ver.Key = key

	// Trailers are only known once the body has been read; the body is
	// read at most once, and only when something covered needs it.
	var content []byte
	contentRead := false
	readContent := func() error {
		if contentRead {
			return nil
		}
		contentRead = true
		var err error
		content, err = body(cmp.Or(v.MaxBodyBytes, defaultMaxBodyBytes))
		return err
	}
	if coversTrailer(p.Components) {
		if err := readContent(); err != nil {
			return nil, err
		}
	}
	if err := v.checkSignature(m, in, p.Components, key); err != nil {
		return nil, err
	}
	if coversContentDigest(p.Components) && !v.InsecureSkipContentDigest {
		if err := readContent(); err != nil {
			return nil, err
		}
		if err := VerifyContentDigest(strings.Join(fieldLines(h, "content-digest"), ", "), content); err != nil {
			return nil, err
		}
	}

	if !v.InsecureSkipNonceCheck {
		if err := v.Nonces.CheckNonce(ctx, p.KeyID, p.Nonce, ver.NonceUntil); err != nil {
			if kindOf(err) != nil {
				return nil, err
			}
			return nil, errors.New("httpsig: nonce check failed: " + err.Error())
		}
	}
	return ver, nil
}

// selectSignature parses Signature-Input and Signature (RFC 9421 §4) and
// picks the signature to verify.
func (v *Verifier) selectSignature(h http.Header) (*signatureInput, error) {
	inLines := fieldLines(h, "signature-input")
	sigLines := fieldLines(h, "signature")
	switch {
	case len(inLines) == 0:
		return nil, newError(ErrHeadersInvalid, "Signature-Input is missing")
	case len(sigLines) == 0:
		return nil, newError(ErrHeadersInvalid, "Signature is missing")
	case len(inLines) > 1:
		return nil, newError(ErrHeadersInvalid, "Signature-Input appears on several field lines")
	case len(sigLines) > 1:
		return nil, newError(ErrHeadersInvalid, "Signature appears on several field lines")
	}
	inDict, err := httpsfv.UnmarshalDictionary(inLines)
	if err != nil {
		return nil, wrapError(ErrHeadersInvalid, "Signature-Input is not a structured dictionary", err)
	}
	sigDict, err := httpsfv.UnmarshalDictionary(sigLines)
	if err != nil {
		return nil, wrapError(ErrHeadersInvalid, "Signature is not a structured dictionary", err)
	}
	label := v.Label
	if label == "" {
		if len(inDict.Names()) != 1 || len(sigDict.Names()) != 1 {
			return nil, newError(ErrHeadersInvalid, "message carries more than one signature")
		}
		label = inDict.Names()[0]
	}
	inM, ok := inDict.Get(label)
	if !ok {
		return nil, newError(ErrHeadersInvalid, "Signature-Input has no member "+quoteForError(label))
	}
	sigM, ok := sigDict.Get(label)
	if !ok {
		return nil, newError(ErrHeadersInvalid, "Signature has no member "+quoteForError(label))
	}
	list, ok := inM.(httpsfv.InnerList)
	if !ok {
		return nil, newError(ErrHeadersInvalid, "Signature-Input member is not an inner list")
	}
	sigItem, ok := sigM.(httpsfv.Item)
	if !ok {
		return nil, newError(ErrHeadersInvalid, "Signature member is not a byte sequence")
	}
	sig, ok := sigItem.Value.([]byte)
	if !ok {
		return nil, newError(ErrHeadersInvalid, "Signature member is not a byte sequence")
	}
	return &signatureInput{label: label, list: list, sig: sig}, nil
}

// parseSignatureParams fills p from a received covered-components list. The
// list itself is kept for re-serialisation, so unknown parameters and
// parameter order survive into @signature-params.
func parseSignatureParams(list httpsfv.InnerList, response bool, p *Params) error {
	if len(list.Items) > maxComponents {
		return newError(ErrComponentsInvalid, "too many covered components")
	}
	p.Components = make([]Component, len(list.Items))
	for i, it := range list.Items {
		c, err := componentFromItem(it)
		if err != nil {
			return err
		}
		if err := c.check(response); err != nil {
			return err
		}
		for j := range i {
			if p.Components[j] == c {
				return newError(ErrComponentsInvalid, "component "+quoteForError(c.Name)+" listed twice")
			}
		}
		p.Components[i] = c
	}
	if list.Params == nil {
		return nil
	}
	for _, k := range list.Params.Names() {
		val, _ := list.Params.Get(k)
		switch k {
		case "created", "expires":
			n, ok := val.(int64)
			if !ok {
				return newError(ErrHeadersInvalid, k+" parameter is not an integer")
			}
			if k == "created" {
				p.Created = time.Unix(n, 0)
			} else {
				p.Expires = time.Unix(n, 0)
			}
		case "keyid", "alg", "nonce", "tag":
			s, ok := val.(string)
			if !ok {
				kind := ErrHeadersInvalid
				if k == "nonce" {
					kind = ErrNonceInvalid
				}
				return newError(kind, k+" parameter is not a string")
			}
			switch k {
			case "keyid":
				p.KeyID = s
			case "alg":
				p.Alg = s
			case "nonce":
				p.Nonce = s
			case "tag":
				p.Tag = s
			}
		}
	}
	return nil
}

func covers(comps []Component, want *Component) bool {
	for i := range comps {
		if comps[i] == *want {
			return true
		}
	}
	return false
}

func coversTrailer(comps []Component) bool {
	for i := range comps {
		if comps[i].TR && !comps[i].Req {
			return true
		}
	}
	return false
}

func coversContentDigest(comps []Component) bool {
	for i := range comps {
		if comps[i].Name == "content-digest" && !comps[i].Req && !comps[i].TR {
			return true
		}
	}
	return false
}

// checkSignature rebuilds the signature base from the received list and
// verifies the signature, first over the lower-cased method when that is
// accepted and would differ.
func (v *Verifier) checkSignature(m *message, in *signatureInput, comps []Component, key VerifyingKey) error {
	lower := v.AcceptLowercaseMethod && hasUpper(m.method) && coversMethod(comps)
	bp := getBuffer()
	defer putBuffer(bp)
	for {
		base, err := appendReceivedBase((*bp)[:0], m, in.list, comps, lower)
		*bp = base
		if err != nil {
			return err
		}
		if key.Verify(base, in.sig) == nil {
			return nil
		}
		if !lower {
			return newError(ErrSignatureInvalid, "signature does not verify")
		}
		lower = false
	}
}

// appendReceivedBase builds the signature base (RFC 9421 §2.5) from the
// received list: each identifier and @signature-params are the canonical
// re-serialisation of what was received.
func appendReceivedBase(b []byte, m *message, list httpsfv.InnerList, comps []Component, lowerMethod bool) ([]byte, error) {
	var err error
	for i := range comps {
		if b, err = appendItem(b, list.Items[i]); err != nil {
			return b, newError(ErrComponentsInvalid, "component identifier cannot be serialised")
		}
		b = append(b, ':', ' ')
		if b, err = m.appendValue(b, &comps[i], lowerMethod); err != nil {
			return b, err
		}
		b = append(b, '\n')
	}
	b = append(b, `"@signature-params": `...)
	if b, err = appendInnerList(b, list); err != nil {
		return b, newError(ErrHeadersInvalid, "signature parameters cannot be serialised")
	}
	return b, nil
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

func coversMethod(comps []Component) bool {
	for i := range comps {
		if comps[i].Name == compMethod {
			return true
		}
	}
	return false
}
