// Package activity keeps what paired gateways did: each gateway reports
// its decisions about agents' requests (time, agent name and key,
// connection, service, REST method and route template or MCP tool,
// decision and reason, status, latency; never a payload, query string,
// header or secret), and the owner lists, filters and exports them. A
// gateway reports changes of its own the same way, with an Event (an MCP
// tool's pinned definition changed, accepted or rejected).
//
// A gateway reports with a POST to /v1/gateways/activity signed by its own
// identity, the key the pairing bound (pairwire.ActivityBatch, at most
// pairwire.MaxActivityBatch records). The records are stored in the
// namespace of the owner that key is paired with, whatever they say: a
// gateway cannot write into another owner's activity, and a key that is
// not paired is refused (403 GATEWAY_NOT_PAIRED) before its nonce or body
// costs a write.
//
// A request refused before a signature verified is never a record: its
// sender chose everything but the reason. Gateways count them
// (pairwire.UnverifiedCount), and a record reported for one (no agent
// key, decision deny) is folded into the counts, kept per minute.
//
// Storage is bounded for two classes apart, so that unsigned noise never
// evicts an agent's record. Records of verified agents are kept
// Config.Retention (30 days), at most Config.MaxPerNamespace (1,000,000)
// a namespace; records with no verified agent, and the counts, are kept
// Config.UnsignedRetention (7 days), at most
// Config.MaxUnsignedPerNamespace (100,000) records. Maintain deletes the
// old; the insert that passes a bound deletes its class's oldest in the
// same transaction.
//
// The owner's routes: GET /v1/activity (filters agent, connection,
// decision, since, until; keyset pages newest first),
// GET /v1/activity/export (the same selection as JSON Lines or CSV) and
// GET /v1/activity/unverified (the counts). The dashboard reads List.
package activity
