// Package upstreamauth gets the OAuth 2.0 access tokens that the gateway
// puts on requests to connections in the oauth2_client_credentials and
// oauth2_authorization_code modes (package credvault). It uses
// golang.org/x/oauth2 for the protocol (RFC 6749, PKCE per RFC 7636) and
// adds what a proxy needs around it:
//
//   - one cached token per connection and account, refreshed ahead of its
//     expiry off the request path, with one token request however many
//     calls wait for it;
//   - refresh tokens kept sealed in the vault, a rotated one stored only
//     if it still replaces the token it was refreshed from;
//   - a provider's invalid_grant marks the account "needs reconnecting";
//   - discovery from an issuer (RFC 8414, then OpenID Connect Discovery),
//     the owner's connect flow with state and the iss check of RFC 9207,
//     and revocation at the provider (RFC 7009);
//   - the MCP authorization flow (ConnectMCP): an MCP server's 401, its
//     protected resource metadata (RFC 9728), client registration by
//     metadata document or RFC 7591, and the resource parameter (RFC
//     8707), run by the go-sdk's auth package.
//
// No token, client secret or token endpoint answer reaches an error, a
// log line or a metric: errors say what failed and what to do.
//
//	tokens, _ := upstreamauth.New(upstreamauth.Config{Vault: vault})
//	tok, err := tokens.Token(ctx, resolved, "alice")
//
// docs/gateway.md, section "OAuth upstreams", has the long story.
package upstreamauth
