// Package activity keeps what paired gateways did: each gateway reports
// its decisions about agents' requests (time, agent name and key,
// connection, service, REST method and route template or MCP tool,
// decision and reason, status, latency; never a payload, query string,
// header or secret), and the owner lists, filters and exports them.
//
// A gateway reports with a POST to /v1/gateways/activity signed by its own
// identity, the key the pairing bound (pairwire.ActivityBatch, at most
// pairwire.MaxActivityBatch records). The records are stored in the
// namespace of the owner that key is paired with, whatever they say: a
// gateway cannot write into another owner's activity, and a key that is
// not paired is refused (403 GATEWAY_NOT_PAIRED) before its nonce or body
// costs a write.
//
// Storage is bounded twice: records older than Config.Retention (30 days
// by default) are deleted by Maintain, and a namespace holds at most
// Config.MaxPerNamespace records (1,000,000 by default): the insert that
// passes it deletes the oldest in the same transaction.
//
// The owner's routes: GET /v1/activity (filters agent, connection,
// decision, since, until; keyset pages newest first) and
// GET /v1/activity/export (the same selection as JSON Lines or CSV). The
// dashboard reads List.
package activity
