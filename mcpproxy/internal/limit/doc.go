// Package limit holds the protections in front of an upstream MCP server:
// the per-connection circuit breaker (Breaker) and the tool-call rate limit
// per connection and namespace (Limiter).
package limit
