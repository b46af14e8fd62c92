// Package httpsig implements HTTP Message Signatures (RFC 9421) and the
// Content-Digest field (RFC 9530) for net/http clients and servers. A
// Signer signs requests and responses; Transport signs each outgoing
// request of a client. A Verifier checks them; Middleware puts it in
// front of a handler. It covers the derived components and algorithms of
// RFC 9421 and verifies signatures made by any RFC 9421 signer.
//
// A zero Verifier rejects everything: Keys must resolve a key and Nonces
// must record nonces. The created parameter is required and bounded in
// time. Every verification error wraps one sentinel (ErrHeadersInvalid,
// ...), for servers to map onto their own error answers.
//
// The package is RFC-exact by default. Its one deviation is opt-in:
// Signer.LowercaseMethod signs @method lower-cased, and
// Verifier.AcceptLowercaseMethod accepts both forms. The
// idn-rfc9421-v1 profile uses them because deployed SDKs sign "post".
//
// Signing a request (ExampleSigner_SignRequest runs it;
// ExampleVerifier_Middleware shows the other side):
//
//	s := &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(key)}
//	err := s.SignRequest(r, httpsig.Params{
//		Components: []httpsig.Component{{Name: "@method"}, {Name: "@target-uri"}, {Name: "content-digest"}},
//		Created:    time.Now(),
//		KeyID:      "key-1",
//		Alg:        httpsig.AlgEd25519,
//		Nonce:      nonce,
//	})
//
// The zero value of every field of Verifier, Signer and Transport is the
// safe one. docs/profile.md lists what the package implements, its
// defaults, and the profile built on it.
package httpsig
