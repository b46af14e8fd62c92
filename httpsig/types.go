package httpsig

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// Component identifies one covered component (RFC 9421 §2): an HTTP field
// or a derived component, with its parameters (§2.1, §2.2, §2.4).
type Component struct {
	Name      string // lower-case field name, or a derived component name starting with "@"
	SF        bool   // ;sf — strict structured-field re-serialisation (§2.1.1)
	Key       string // ;key="member" — one dictionary member (§2.1.2)
	BS        bool   // ;bs — each field line wrapped as a byte sequence (§2.1.3)
	Req       bool   // ;req — in a response signature, the component of the related request (§2.4)
	TR        bool   // ;tr — the field from the trailers (§2.1.4)
	QueryName string // ;name="..." for "@query-param" (§2.2.8)
}

// Params are the signature parameters (RFC 9421 §2.3) and covered components.
type Params struct {
	Components []Component
	Created    time.Time // zero: omitted
	Expires    time.Time // zero: omitted
	Nonce      string    // "": omitted
	Alg        string    // "": omitted
	KeyID      string    // "": omitted
	Tag        string    // "": omitted
}

// KeyResolver finds the verifying key for a signature. It receives the
// message's header fields and the parsed parameters (keyid, alg, ...).
// An error rejects the signature with ErrIdentityInvalid unless the error
// already wraps one of this package's sentinels.
type KeyResolver interface {
	ResolveKey(ctx context.Context, h http.Header, p *Params) (VerifyingKey, error)
}

// KeyResolverFunc adapts a function to KeyResolver.
type KeyResolverFunc func(ctx context.Context, h http.Header, p *Params) (VerifyingKey, error)

// ResolveKey calls f.
func (f KeyResolverFunc) ResolveKey(ctx context.Context, h http.Header, p *Params) (VerifyingKey, error) {
	return f(ctx, h, p)
}

// NonceChecker provides replay protection.
type NonceChecker interface {
	// CheckNonce records nonce for scope until the given time, or fails
	// with an error wrapping ErrReplayDetected if it is already recorded.
	// Other failures (a full store) should not wrap a sentinel: the
	// verifier then returns them wrapping none, which Middleware's default
	// answers with 500.
	CheckNonce(ctx context.Context, scope, nonce string, until time.Time) error
}

// Verified describes a signature that verified.
type Verified struct {
	Label  string       // the signature's label in Signature-Input/Signature
	Params Params       // the parameters and covered components as received
	Key    VerifyingKey // the key that verified it
	// NonceUntil is the last instant at which this signature could still be
	// accepted: created + MaxAge, or expires when that is earlier. A nonce
	// must be remembered at least until then.
	NonceUntil time.Time
}

func quoteForError(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strconv.Quote(s)
}
