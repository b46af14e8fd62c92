// Package identity implements idn agent identities and the idn-rfc9421-v1
// signing profile, whose wire format docs/profile.md describes.
//
// An Identity is a namespace, an Ed25519 key pair and a self-signed
// certificate, stored as a version 1 identity record at
// <home>/identities/<namespace>/identity.json (folder 0700, file 0600,
// written atomically; unknown fields survive a load and save). Namespaces map
// to DIDs did:idn:<namespace>; ParseDID also reads the extended form
// did:idn:<namespace>:<service>#<agent>#<subject>. A certificate may carry
// the agent's display name (NewNamed, Rename; ValidName says which names
// are allowed): its proof covers the name, every signature covers the
// certificate, and Verifier hands it to the server as Caller.Name, which a
// gateway files with the claims it submits.
//
// Identity.Sign and Identity.Transport sign requests under the profile: the
// identity headers idn-namespace, idn-subject (the namespace by default),
// idn-agent-key and idn-agent-cert, content-digest for a non-empty body, and
// an RFC 9421 signature "sig1" over @method (lower-cased, the profile's one
// deviation from RFC 9421), @target-uri and those headers, with created,
// keyid, alg and nonce. A subject beyond printable ASCII travels as an
// RFC 9651 Display String (EncodeSubject); Verifier decodes it
// (DecodeSubject) and hands the caller the decoded subject.
//
// Verifier checks a request against the profile: exactly the profile's
// component set, the identity headers against the certificate, the
// certificate's proof and validity, the signature (over the lower-cased or
// the as-sent method, so strict RFC 9421 signers work too), the time window
// and the nonce. Verified certificates are cached, so a hot caller costs one
// Ed25519 verification per request. Errors wrap the httpsig sentinels;
// AuthCode maps them to the AUTH_* codes of package errcode.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Verifier and SignOptions is the safe one (a required field left
// empty is refused), and a protection is turned off only by a field that
// says so: a negative number, an explicit off value, or an Insecure… switch.
package identity
