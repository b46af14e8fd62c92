package identity

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/identity/display"
)

// Profile names the signing profile this package implements.
const Profile = "idn-rfc9421-v1"

// Identity headers of the profile.
const (
	HeaderNamespace = "idn-namespace"
	HeaderSubject   = "idn-subject"
	HeaderAgentKey  = "idn-agent-key"
	HeaderAgentCert = "idn-agent-cert"
)

// maxSubject bounds the idn-subject header.
const maxSubject = 256

// The profile's component lists, without and with a body.
var (
	componentsNoBody = []httpsig.Component{
		{Name: "@method"}, {Name: "@target-uri"},
		{Name: HeaderNamespace}, {Name: HeaderSubject}, {Name: HeaderAgentKey}, {Name: HeaderAgentCert},
	}
	componentsBody = []httpsig.Component{
		{Name: "@method"}, {Name: "@target-uri"}, {Name: "content-digest"},
		{Name: HeaderNamespace}, {Name: HeaderSubject}, {Name: HeaderAgentKey}, {Name: HeaderAgentCert},
	}
)

// The MCP routing headers a signature with a body also covers when the
// request carries them (MCP 2026-07-28 names a message's method and
// target in them), in this order, mcp-name only after mcp-method.
var componentsMCP = []httpsig.Component{{Name: "mcp-method"}, {Name: "mcp-name"}}

// SignOptions adjusts one signature. The zero value signs now, with a
// random nonce, as the namespace itself.
type SignOptions struct {
	Subject string    // idn-subject; "" means the namespace
	Nonce   string    // "" means 16 random bytes in hex
	Created time.Time // zero means now
}

// Sign signs r in place under the idn-rfc9421-v1 profile: it buffers the
// body, sets content-digest when the body is non-empty, sets the four
// identity headers, and replaces any Signature and Signature-Input with a
// single "sig1" signature. r.URL must be absolute: its scheme, host (or
// r.Host) and raw path and query are what the signature covers.
func (id *Identity) Sign(r *http.Request, o SignOptions) error {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return fmt.Errorf("identity: read request body: %w", err)
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		r.ContentLength = int64(len(b))
	}
	if len(body) > 0 {
		d, err := httpsig.ContentDigest(httpsig.DigestSHA256, body)
		if err != nil {
			return err
		}
		r.Header.Set("Content-Digest", d)
	} else {
		r.Header.Del("Content-Digest")
	}
	r.Header.Del("Signature")
	r.Header.Del("Signature-Input")
	p, err := id.prepareRequest(r, o, len(body) > 0)
	if err != nil {
		return err
	}
	return id.signer().SignRequest(r, p)
}

// Transport returns an http.RoundTripper that signs a clone of every
// request with o (a fresh nonce and creation time per request unless o
// fixes them) and sends it with base (nil means http.DefaultTransport).
// A request an http.Client made to follow a redirect is never signed: it
// fails with httpsig.ErrRedirectRefused, so whoever answers a 3xx cannot
// obtain a signed request for a URL of its choosing. Clients that want the
// 3xx itself set CheckRedirect to return http.ErrUseLastResponse.
func (id *Identity) Transport(base http.RoundTripper, o SignOptions) http.RoundTripper {
	return &httpsig.Transport{
		Base:   base,
		Signer: id.signer(),
		Params: func(r *http.Request, body []byte) (httpsig.Params, error) {
			r.Header.Del("Signature")
			r.Header.Del("Signature-Input")
			return id.prepareRequest(r, o, len(body) > 0)
		},
	}
}

func (id *Identity) signer() *httpsig.Signer {
	return &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(id.privateKey), Label: "sig1", LowercaseMethod: true}
}

// prepareRequest sets the identity headers on r and returns the profile's
// signature parameters.
func (id *Identity) prepareRequest(r *http.Request, o SignOptions, hasBody bool) (httpsig.Params, error) {
	// HTTP drops spaces and tabs at either end of a header value, so the
	// subject is what remains.
	subject := strings.Trim(o.Subject, " \t")
	if o.Subject == "" {
		subject = id.Namespace
	}
	if err := validSubject(subject); err != nil {
		return httpsig.Params{}, err
	}
	nonce := o.Nonce
	if nonce == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return httpsig.Params{}, fmt.Errorf("identity: nonce: %w", err)
		}
		nonce = hex.EncodeToString(b[:])
	} else if err := validNonce(nonce); err != nil {
		return httpsig.Params{}, err
	}
	created := o.Created
	if created.IsZero() {
		created = time.Now()
	}
	h := r.Header
	h.Set(HeaderNamespace, id.Namespace)
	h.Set(HeaderSubject, EncodeSubject(subject))
	h.Set(HeaderAgentKey, id.wire.publicKey)
	h.Set(HeaderAgentCert, id.wire.cert)
	components := componentsNoBody
	if hasBody {
		components = componentsBody
		if h.Get("Mcp-Method") != "" {
			components = append(slices.Clip(components), componentsMCP[0])
			if h.Get("Mcp-Name") != "" {
				components = append(components, componentsMCP[1])
			}
		}
	}
	return httpsig.Params{
		Components: components,
		Created:    created,
		KeyID:      id.wire.keyID,
		Alg:        httpsig.AlgEd25519,
		Nonce:      nonce,
	}, nil
}

func validSubject(s string) error {
	if s == "" || len(s) > maxSubject {
		return fmt.Errorf("identity: subject must be 1 to %d bytes", maxSubject)
	}
	if err := display.Check(s); err != nil {
		return fmt.Errorf("identity: subject %w", err)
	}
	return nil
}

// validNonce applies the profile's nonce rule: 8 to 128 visible ASCII
// characters, no '"' or '\'.
func validNonce(s string) error {
	if len(s) < 8 || len(s) > 128 {
		return fmt.Errorf("identity: nonce must be 8 to 128 characters")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return fmt.Errorf("identity: nonce must be visible ASCII without '\"' or '\\'")
		}
	}
	return nil
}
