// Package httpsig implements HTTP Message Signatures (RFC 9421) and the
// Content-Digest field (RFC 9530) for net/http clients and servers.
//
// # What is implemented
//
//   - Signature bases (RFC 9421 §2.5) over HTTP fields (§2.1) with the sf,
//     key, bs, req and tr parameters, and over the derived components of
//     §2.2: @method, @target-uri, @authority (lower-cased, default port
//     removed), @scheme, @request-target, @path, @query, @query-param
//     (form-urlencoded parsing and re-encoding; a repeated name is an
//     error) and @status, plus @signature-params (§2.3).
//   - Signer (§3.1) and Verifier (§3.2) with the Signature-Input and
//     Signature fields (§4), several signatures per message selected by
//     label, responses covering request components with ;req (§2.4).
//   - The algorithms of §3.3: ed25519, ecdsa-p256-sha256,
//     ecdsa-p384-sha384 (r||s encoding), rsa-pss-sha512 (64-byte salt),
//     rsa-v1_5-sha256 and hmac-sha256 (constant-time comparison).
//   - Content-Digest (RFC 9530 §2) with sha-256 and sha-512; the verifier
//     checks the body whenever content-digest is covered.
//   - Middleware for servers and a Transport that signs a clone of each
//     outgoing request, and never a request made to follow a redirect.
//
// All structured fields are parsed with github.com/dunglas/httpsfv. The
// verifier rebuilds "@signature-params" and every component identifier from
// the list it received (canonical re-serialisation, parameter order and
// unknown parameters kept), so it verifies signatures made by any RFC 9421
// signer. The target URI of a received request is Verifier.Origin plus the
// path and query of the request-target exactly as received, never
// re-encoded; an absolute-form target cannot choose the scheme or authority.
//
// # Secure defaults
//
// A zero Verifier rejects everything: Keys must resolve a key and Nonces
// must record nonces, unless InsecureSkipNonceCheck hands replay protection
// to the caller. The created parameter is required and must lie within
// [now-MaxAge, now+FutureSkew] (5 minutes and 30 seconds by default);
// expires is honoured; alg, when present, must match the key. With an empty
// Label a message must carry exactly one signature, and Signature-Input or
// Signature repeated on several field lines is rejected. A covered
// content-digest is checked against a body of at most MaxBodyBytes (8 MiB).
// Every verification error wraps one sentinel (ErrHeadersInvalid, ...), for
// servers to map onto their own error answers.
//
// # The one deviation, opt-in
//
// RFC 9421 §2.2.1 signs @method as sent. Signer.LowercaseMethod signs it
// lower-cased instead, and Verifier.AcceptLowercaseMethod accepts both
// forms; the idn-rfc9421-v1 profile uses them because deployed SDKs sign
// "post". Both are off by default, leaving the package RFC-exact.
//
// # Performance
//
// Signature bases are built in one pooled buffer, and the package allocates
// little besides what httpsfv needs to parse the two signature fields: see
// the benchmarks comparing SignRequest and VerifyRequest with bare Ed25519.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Verifier, Signer and Transport is the safe one (a required field
// left empty is refused), and a protection is turned off only by a field
// that says so: a negative number, an explicit off value, or an Insecure…
// switch.
package httpsig
