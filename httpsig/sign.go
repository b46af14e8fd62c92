package httpsig

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/dunglas/httpsfv"
)

// Signer signs messages with one key. Key is required; the other fields
// work at their zero value.
type Signer struct {
	Key   SigningKey // required
	Label string     // "" means "sig1"
	// LowercaseMethod signs "@method" lower-cased. NOT RFC 9421 (§2.2.1
	// says as sent); the idn-rfc9421-v1 profile opts in to it.
	LowercaseMethod bool
}

const defaultLabel = "sig1"

// SignRequest signs r with the components and parameters of p (RFC 9421
// §3.1) and adds the signature to the Signature-Input and Signature fields
// (§4), keeping signatures already present under other labels. A client
// request (RequestURI empty) is signed as net/http will send it: r.URL's
// scheme, r.Host or else r.URL.Host, and r.URL.RequestURI().
func (s *Signer) SignRequest(r *http.Request, p Params) error {
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	return s.sign(requestMessage(r, nil), r.Header, &p)
}

// SignResponse signs resp like SignRequest. req is the request resp answers;
// it may be nil unless a component carries ;req.
func (s *Signer) SignResponse(resp *http.Response, req *http.Request, p Params) error {
	var rm *message
	if req != nil {
		rm = requestMessage(req, nil)
	}
	if resp.Header == nil {
		resp.Header = make(http.Header)
	}
	return s.sign(responseMessage(resp, rm), resp.Header, &p)
}

func (s *Signer) sign(m *message, h http.Header, p *Params) error {
	if s.Key == nil {
		return errors.New("httpsig: Signer.Key is nil")
	}
	label := s.Label
	if label == "" {
		label = defaultLabel
	}
	if !validKey(label) {
		return errors.New("httpsig: label " + quoteForError(label) + " is not a structured-field key")
	}
	if p.Alg != "" && p.Alg != s.Key.Algorithm() {
		return errors.New("httpsig: Params.Alg " + quoteForError(p.Alg) + " does not match the key's " + s.Key.Algorithm())
	}
	for i := range p.Components {
		c := &p.Components[i]
		if err := c.check(m.response); err != nil {
			return err
		}
		for j := range i {
			if p.Components[j] == *c {
				return newError(ErrComponentsInvalid, "component "+quoteForError(c.Name)+" listed twice")
			}
		}
	}

	// input is the Signature-Input member "label=(...);params"; its part
	// after "label=" is the @signature-params value.
	input := make([]byte, 0, len(label)+48+24*len(p.Components)+len(p.KeyID)+len(p.Nonce)+len(p.Tag)+len(p.Alg))
	input = append(input, label...)
	input = append(input, '=')
	paramsAt := len(input)
	input, err := appendSignatureParams(input, p)
	if err != nil {
		return err
	}

	bp := getBuffer()
	defer putBuffer(bp)
	base, err := appendBase(*bp, m, p.Components, input[paramsAt:], s.LowercaseMethod)
	*bp = base
	if err != nil {
		return err
	}
	sig, err := s.Key.Sign(base)
	if err != nil {
		return errors.New("httpsig: signing failed: " + err.Error())
	}

	out := make([]byte, 0, len(label)+3+base64.StdEncoding.EncodedLen(len(sig)))
	out = append(out, label...)
	out = append(out, '=', ':')
	out = base64.StdEncoding.AppendEncode(out, sig)
	out = append(out, ':')
	return addSignatureFields(h, label, string(input), string(out))
}

// appendSignatureParams serialises the covered components and parameters in
// the order created, expires, keyid, alg, nonce, tag (RFC 9421 §2.3).
func appendSignatureParams(b []byte, p *Params) ([]byte, error) {
	var err error
	b = append(b, '(')
	for i := range p.Components {
		if i > 0 {
			b = append(b, ' ')
		}
		if b, err = p.Components[i].appendIdentifier(b); err != nil {
			return b, newError(ErrComponentsInvalid, "component name or parameter is not a valid string")
		}
	}
	b = append(b, ')')
	if !p.Created.IsZero() {
		b = append(b, ";created="...)
		b = strconv.AppendInt(b, p.Created.Unix(), 10)
	}
	if !p.Expires.IsZero() {
		b = append(b, ";expires="...)
		b = strconv.AppendInt(b, p.Expires.Unix(), 10)
	}
	for _, sp := range [...]struct{ name, value string }{
		{"keyid", p.KeyID}, {"alg", p.Alg}, {"nonce", p.Nonce}, {"tag", p.Tag},
	} {
		if sp.value == "" {
			continue
		}
		b = append(b, ';')
		b = append(b, sp.name...)
		b = append(b, '=')
		if b, err = appendString(b, sp.value); err != nil {
			return b, errors.New("httpsig: parameter " + sp.name + " must be printable ASCII")
		}
	}
	return b, nil
}

// appendBase builds the signature base (RFC 9421 §2.5) for the signer.
func appendBase(b []byte, m *message, comps []Component, sigParams []byte, lowerMethod bool) ([]byte, error) {
	var err error
	for i := range comps {
		if b, err = comps[i].appendIdentifier(b); err != nil {
			return b, err
		}
		b = append(b, ':', ' ')
		if b, err = m.appendValue(b, &comps[i], lowerMethod); err != nil {
			return b, err
		}
		b = append(b, '\n')
	}
	b = append(b, `"@signature-params": `...)
	return append(b, sigParams...), nil
}

// addSignatureFields appends one member to Signature-Input and Signature,
// each kept on a single field line so that verifiers rejecting repeated
// lines accept the result.
func addSignatureFields(h http.Header, label, input, sig string) error {
	// Existing signature fields are expected under their canonical keys,
	// as http.Header.Set and net/http's parser store them.
	oldIn, oldSig := h["Signature-Input"], h["Signature"]
	if len(oldIn) == 0 && len(oldSig) == 0 {
		h["Signature-Input"] = []string{input}
		h["Signature"] = []string{sig}
		return nil
	}
	for _, old := range [][]string{oldIn, oldSig} {
		d, err := httpsfv.UnmarshalDictionary(old)
		if err != nil {
			return wrapError(ErrHeadersInvalid, "existing signature field is malformed", err)
		}
		if _, dup := d.Get(label); dup {
			return newError(ErrHeadersInvalid, "label "+quoteForError(label)+" is already in use")
		}
	}
	h.Del("Signature-Input")
	h.Del("Signature")
	h["Signature-Input"] = []string{joinMember(oldIn, input)}
	h["Signature"] = []string{joinMember(oldSig, sig)}
	return nil
}

func joinMember(lines []string, member string) string {
	n := len(member)
	for _, l := range lines {
		n += len(l) + 2
	}
	b := make([]byte, 0, n)
	for _, l := range lines {
		if l = trimOWS(l); l != "" {
			b = append(b, l...)
			b = append(b, ", "...)
		}
	}
	return string(append(b, member...))
}

// validKey reports whether s is a structured-field key (RFC 9651 §3.1.2).
func validKey(s string) bool {
	if s == "" || !(s[0] == '*' || 'a' <= s[0] && s[0] <= 'z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*') {
			return false
		}
	}
	return true
}

// Signature bases are built in pooled buffers: keys must not retain base.
var bufferPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func getBuffer() *[]byte { return bufferPool.Get().(*[]byte) }

func putBuffer(b *[]byte) {
	if cap(*b) > 64<<10 {
		return
	}
	*b = (*b)[:0]
	bufferPool.Put(b)
}
