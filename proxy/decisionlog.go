package proxy

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/netip"

	"github.com/idnhq/idn/kit/clientip"
	"github.com/idnhq/idn/kit/textcap"
)

// decisionLog writes JSON decision logs: identity values
// become stable fingerprints, client addresses are masked, other values
// are cut at textcap.Name bytes, and secrets are never passed to it. A nil *decisionLog logs nothing.
type decisionLog struct {
	logger *slog.Logger
	salt   []byte
}

// fingerprint returns "fp:" and 12 hex digits of HMAC-SHA256(salt, v): stable
// for one install, not reversible by guessing names without the salt.
func (d *decisionLog) fingerprint(v string) string {
	if v == "" {
		return ""
	}
	mac := hmac.New(sha256.New, d.salt)
	mac.Write([]byte(v))
	return "fp:" + hex.EncodeToString(mac.Sum(nil))[:12]
}

// decision is one logged decision. Fields with identity meaning are
// fingerprinted by log.
type decision struct {
	kind       string // "auth", "admin", "runtime", "upstream", "mcp"
	outcome    string // "allow", "deny", an upstream outcome, or an MCP result
	code       string // error code when denied
	requestID  string
	connection string
	namespace  string
	subject    string
	publicKey  string
	keyID      string
	claimID    string
	client     netip.Addr
	status     int
	method     string // the HTTP method, or the MCP method of an "mcp" decision
	tool       string // the MCP tool of a tools/call
	protocol   string // "mcp" for MCP traffic; empty for HTTP
	latencyMS  float64
}

func (d *decisionLog) log(ctx context.Context, e decision) {
	if d == nil || d.logger == nil {
		return
	}
	attrs := make([]slog.Attr, 0, 16)
	add := func(k, v string) {
		if v != "" {
			// A method, tool or connection id may be the caller's choice.
			attrs = append(attrs, slog.String(k, textcap.Clip(v, textcap.Name)))
		}
	}
	add("kind", e.kind)
	add("outcome", e.outcome)
	add("code", e.code)
	add("request_id", e.requestID)
	add("connection_id", e.connection)
	add("method", e.method)
	add("tool", e.tool)
	add("protocol", e.protocol)
	add("namespace", d.fingerprint(e.namespace))
	add("subject", d.fingerprint(e.subject))
	add("public_key", d.fingerprint(e.publicKey))
	add("key_id", d.fingerprint(e.keyID))
	add("claim_id", d.fingerprint(e.claimID))
	add("client_ip", clientip.Mask(e.client))
	if e.status != 0 {
		attrs = append(attrs, slog.Int("status", e.status))
	}
	if e.latencyMS != 0 {
		attrs = append(attrs, slog.Float64("latency_ms", e.latencyMS))
	}
	d.logger.LogAttrs(ctx, slog.LevelInfo, "decision", attrs...)
}
