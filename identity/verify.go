package identity

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/idnhq/idn/httpsig"
)

// Default verification window: a signature's created time may lie up to
// DefaultMaxAge in the past and DefaultFutureSkew in the future.
const (
	DefaultMaxAge     = 300 * time.Second
	DefaultFutureSkew = 30 * time.Second
)

// defaultMaxBodyBytes caps the body read for content-digest checks.
const defaultMaxBodyBytes = 8 << 20

// defaultCertCacheSize bounds the verified-certificate cache.
const defaultCertCacheSize = 4096

// Verifier checks requests against the idn-rfc9421-v1 profile: the exact
// component set, the identity headers, the agent certificate, the Ed25519
// signature over the lower-cased method (or the method as sent, the strict
// RFC 9421 form), the time window and the nonce. Errors wrap the httpsig
// sentinels, so AuthCode maps them to the AUTH_* codes.
//
// A Verifier must not be copied after first use. Its zero value verifies
// with the default window and rejects every request, because it has no
// nonce checker.
type Verifier struct {
	Clock      func() time.Time // nil: time.Now
	MaxAge     time.Duration    // zero: DefaultMaxAge
	FutureSkew time.Duration    // zero: DefaultFutureSkew

	// Nonces records each accepted nonce, scoped by namespace. Nil rejects
	// every request unless InsecureSkipNonceCheck is set.
	Nonces httpsig.NonceChecker
	// InsecureSkipNonceCheck accepts requests without recording their
	// nonce. The caller must then record Caller.Nonce itself before acting
	// on the request (the gateway does, after its claim check, so that only
	// approved callers consume nonce memory).
	InsecureSkipNonceCheck bool

	// Origin gives the scheme and authority @target-uri is rebuilt from;
	// nil means "https" when r.TLS is set, else "http", and r.Host. An
	// absolute-form request-target never overrides them (only its path and
	// query count), so a request signed for another origin does not verify
	// here whatever target it is sent with.
	Origin func(*http.Request) (scheme, authority string)
	// MaxBodyBytes caps the body read to check content-digest; zero means
	// 8 MiB. A larger body fails with httpsig.ErrBodyTooLarge.
	MaxBodyBytes int64
	// InsecureSkipBodyCheck verifies the signature over content-digest but
	// reads no body byte: the caller must pass the body to Caller.CheckBody
	// before acting on it. The gateway does, after its claim and nonce
	// checks, so that only callers it admitted make it buffer a body.
	InsecureSkipBodyCheck bool
	// CertCacheSize bounds the cache of verified certificates; zero means 4096.
	CertCacheSize int

	once  sync.Once
	base  httpsig.Verifier
	certs certCache
}

// Caller is an agent whose request passed verification.
type Caller struct {
	Namespace  string
	Subject    string // decoded from idn-subject (DecodeSubject)
	Name       string // the certificate's agent display name, "" for none
	KeyID      string
	PublicKey  string            // "ed25519:<base64>"
	Key        ed25519.PublicKey // the same key, raw
	Nonce      string
	Created    time.Time
	NonceUntil time.Time // the nonce must be remembered until then
	Label      string

	digestSigned bool   // the signature covers content-digest
	digest       string // its value
}

func (v *Verifier) init() {
	v.once.Do(func() {
		v.base = httpsig.Verifier{
			InsecureSkipNonceCheck: true, // recorded below, scoped by namespace
			Clock:                  v.Clock,
			MaxAge:                 v.MaxAge,
			FutureSkew:             v.FutureSkew,
			AcceptLowercaseMethod:  true,
			Origin:                 v.Origin,
			MaxBodyBytes:           v.MaxBodyBytes,
			// Checked by Caller.CheckBody, after the signature and only
			// when the caller wants the body.
			InsecureSkipContentDigest: true,
		}
		if v.base.MaxAge == 0 {
			v.base.MaxAge = DefaultMaxAge
		}
		if v.base.MaxBodyBytes == 0 {
			v.base.MaxBodyBytes = defaultMaxBodyBytes
		}
		if v.base.FutureSkew == 0 {
			v.base.FutureSkew = DefaultFutureSkew
		}
		size := v.CertCacheSize
		if size <= 0 {
			size = defaultCertCacheSize
		}
		v.certs.init(size)
	})
}

func (v *Verifier) now() time.Time {
	if v.Clock != nil {
		return v.Clock()
	}
	return time.Now()
}

// Verify checks r and returns the verified caller. It reads no body byte
// before the signature has verified; then, unless InsecureSkipBodyCheck is
// set, it buffers the body (up to MaxBodyBytes), checks it against the
// signed content-digest and leaves r.Body readable from the start.
func (v *Verifier) Verify(r *http.Request) (*Caller, error) {
	v.init()
	var hdr [4]string
	for i, name := range [4]string{HeaderNamespace, HeaderSubject, HeaderAgentKey, HeaderAgentCert} {
		vals := r.Header[http.CanonicalHeaderKey(name)]
		switch len(vals) {
		case 0:
			return nil, fmt.Errorf("identity: missing %s header: %w", name, httpsig.ErrIdentityInvalid)
		case 1:
			hdr[i] = vals[0]
		default:
			return nil, fmt.Errorf("identity: duplicate %s header: %w", name, httpsig.ErrHeadersInvalid)
		}
	}
	for _, name := range [3]string{"Signature", "Signature-Input", "Content-Digest"} {
		if len(r.Header[name]) > 1 {
			return nil, fmt.Errorf("identity: duplicate %s header: %w", name, httpsig.ErrHeadersInvalid)
		}
	}
	ns, keyHeader, certHeader := hdr[0], hdr[2], hdr[3]
	if ValidNamespace(ns) != nil {
		return nil, fmt.Errorf("identity: bad %s header: %w", HeaderNamespace, httpsig.ErrIdentityInvalid)
	}
	subject, err := DecodeSubject(hdr[1])
	if err != nil {
		return nil, errors.Join(err, httpsig.ErrIdentityInvalid)
	}
	if validSubject(subject) != nil {
		return nil, fmt.Errorf("identity: bad %s header: %w", HeaderSubject, httpsig.ErrIdentityInvalid)
	}
	// Whether a body comes is known from the framing unless it is sent
	// chunked; then either component set passes here and CheckBody
	// decides once the body is read.
	bodyKnown, hasBody := true, false
	switch {
	case r.ContentLength > 0:
		hasBody = true
	case r.Body != nil && r.Body != http.NoBody:
		bodyKnown = false
	}

	var entry *certEntry
	base := v.base
	base.Keys = httpsig.KeyResolverFunc(func(_ context.Context, _ http.Header, p *httpsig.Params) (httpsig.VerifyingKey, error) {
		if err := checkProfileParams(p, bodyKnown, hasBody); err != nil {
			return nil, err
		}
		e, err := v.certificate(certHeader)
		if err != nil {
			return nil, err
		}
		c := e.cert
		switch {
		case c.Namespace != ns:
			return nil, fmt.Errorf("identity: certificate is for namespace %q, not %q: %w", c.Namespace, ns, httpsig.ErrIdentityInvalid)
		case c.PublicKey != keyHeader:
			return nil, fmt.Errorf("identity: certificate key does not match %s: %w", HeaderAgentKey, httpsig.ErrIdentityInvalid)
		case c.KeyID != p.KeyID:
			return nil, fmt.Errorf("identity: keyid %q does not match the certificate: %w", p.KeyID, httpsig.ErrIdentityInvalid)
		}
		if err := c.CheckTimes(v.now(), base.FutureSkew); err != nil {
			return nil, errors.Join(err, httpsig.ErrIdentityInvalid)
		}
		entry = e
		return e.key, nil
	})
	res, err := base.VerifyRequest(r)
	if err != nil {
		return nil, err
	}
	caller := &Caller{
		Namespace:  ns,
		Subject:    subject,
		Name:       entry.cert.Name,
		KeyID:      res.Params.KeyID,
		PublicKey:  entry.cert.PublicKey,
		Key:        entry.pub,
		Nonce:      res.Params.Nonce,
		Created:    res.Params.Created,
		NonceUntil: res.NonceUntil,
		Label:      res.Label,
	}
	if coversContentDigest(res.Params.Components) {
		caller.digestSigned, caller.digest = true, r.Header.Get("Content-Digest")
	}
	if !v.InsecureSkipBodyCheck {
		var body []byte
		if r.Body != nil && r.Body != http.NoBody {
			if body, err = httpsig.ReadBody(r, v.base.MaxBodyBytes); err != nil {
				return nil, err
			}
		}
		if err := caller.CheckBody(body); err != nil {
			return nil, err
		}
	}
	if v.InsecureSkipNonceCheck {
		return caller, nil
	}
	if v.Nonces == nil {
		return nil, fmt.Errorf("identity: no nonce checker configured: %w", httpsig.ErrNonceInvalid)
	}
	if err := v.Nonces.CheckNonce(r.Context(), ns, caller.Nonce, caller.NonceUntil); err != nil {
		return nil, err
	}
	return caller, nil
}

// CheckBody checks the body of a request verified with
// InsecureSkipBodyCheck: under a signature that covers content-digest the
// body must be non-empty and match it; under one that does not, it must be
// empty. body is the whole body; nil means none.
func (c *Caller) CheckBody(body []byte) error {
	switch {
	case !c.digestSigned && len(body) > 0:
		return fmt.Errorf("identity: a body arrived under a signature without content-digest: %w", httpsig.ErrComponentsInvalid)
	case !c.digestSigned:
		return nil
	case len(body) == 0:
		return fmt.Errorf("identity: the signature covers content-digest but no body arrived: %w", httpsig.ErrComponentsInvalid)
	}
	return httpsig.VerifyContentDigest(c.digest, body)
}

func coversContentDigest(comps []httpsig.Component) bool {
	for _, c := range comps {
		if c.Name == "content-digest" {
			return true
		}
	}
	return false
}

// checkProfileParams applies the profile's rules to the signature
// parameters before any cryptography runs. When bodyKnown is false either
// component set passes.
func checkProfileParams(p *httpsig.Params, bodyKnown, hasBody bool) error {
	want := componentsNoBody
	if hasBody {
		want = componentsBody
	}
	got := withoutMCP(p.Components)
	if len(got) < len(p.Components) && !sameComponents(got, componentsBody) {
		// The MCP routing headers ride only with a body.
		got = p.Components
	}
	if !sameComponents(got, want) && (bodyKnown || !sameComponents(got, componentsBody)) {
		return fmt.Errorf("identity: covered components are not the %s set for a request %s a body: %w",
			Profile, map[bool]string{true: "with", false: "without"}[hasBody], httpsig.ErrComponentsInvalid)
	}
	if p.Alg != "" && p.Alg != httpsig.AlgEd25519 {
		return fmt.Errorf("identity: alg %q, want ed25519: %w", p.Alg, httpsig.ErrSignatureInvalid)
	}
	if p.KeyID == "" {
		return fmt.Errorf("identity: missing keyid: %w", httpsig.ErrIdentityInvalid)
	}
	if p.Nonce == "" {
		return fmt.Errorf("identity: missing nonce: %w", httpsig.ErrNonceInvalid)
	}
	if err := validNonce(p.Nonce); err != nil {
		return errors.Join(err, httpsig.ErrNonceInvalid)
	}
	return nil
}

// withoutMCP returns comps less a trailing "mcp-method", or "mcp-method"
// "mcp-name", which a signature with a body may add (componentsMCP).
func withoutMCP(comps []httpsig.Component) []httpsig.Component {
	for n := len(componentsMCP); n > 0; n-- {
		if len(comps) > n && slices.Equal(comps[len(comps)-n:], componentsMCP[:n]) {
			return comps[:len(comps)-n]
		}
	}
	return comps
}

// sameComponents reports whether got holds exactly the components of want,
// each once and without parameters, in any order.
func sameComponents(got, want []httpsig.Component) bool {
	if len(got) != len(want) {
		return false
	}
	var seen uint16
	for _, g := range got {
		if g != (httpsig.Component{Name: g.Name}) {
			return false
		}
		found := false
		for i, w := range want {
			if w.Name == g.Name && seen&(1<<i) == 0 {
				seen |= 1 << i
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// certEntry is a certificate whose proof has been verified.
type certEntry struct {
	cert *Certificate
	pub  ed25519.PublicKey
	key  httpsig.VerifyingKey
}

func (v *Verifier) certificate(header string) (*certEntry, error) {
	if e := v.certs.get(header); e != nil {
		return e, nil
	}
	c, err := DecodeCertificateHeader(header)
	if err != nil {
		return nil, errors.Join(err, httpsig.ErrIdentityInvalid)
	}
	pub, err := c.VerifyProof()
	if err != nil {
		return nil, errors.Join(err, httpsig.ErrIdentityInvalid)
	}
	e := &certEntry{cert: c, pub: pub, key: httpsig.NewEd25519VerifyingKey(pub)}
	v.certs.put(header, e)
	return e, nil
}

// certCache is a bounded map of verified certificates keyed by the exact
// header value. It keeps two generations: when the current one fills, it
// becomes the previous one and the old previous one is dropped, so memory
// stays under 2×size entries and hot entries survive by promotion.
type certCache struct {
	mu        sync.RWMutex
	size      int
	cur, prev map[string]*certEntry
}

func (c *certCache) init(size int) {
	c.size = size
	c.cur = make(map[string]*certEntry)
}

func (c *certCache) get(header string) *certEntry {
	c.mu.RLock()
	e, ok := c.cur[header]
	if !ok {
		e = c.prev[header]
	}
	c.mu.RUnlock()
	if !ok && e != nil {
		c.put(header, e)
	}
	return e
}

func (c *certCache) put(header string, e *certEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cur) >= c.size {
		c.prev, c.cur = c.cur, make(map[string]*certEntry, c.size)
	}
	c.cur[header] = e
}
