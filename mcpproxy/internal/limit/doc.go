// Package limit holds the protections in front of an upstream MCP server:
// the per-connection circuit breaker (Breaker) and the tool-call rate limit
// per connection and namespace (Limiter).
package limit

// Defaults of the protections a zero configuration switches on.
const (
	DefaultBreakerFailures    = 3
	DefaultRateLimitPerMinute = 120
)

// OrOff maps "zero is the default, negative is off" to the value the
// breaker and the limiter read, where zero or less is off.
func OrOff(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}
