// Package approval holds an agent's call until its owner approves that
// very call with a passkey, and checks the approval itself.
//
// A connection's Rules (approval_tools, approval_routes) name the calls
// that wait. Its Policy adds each subject's own (approval_subjects).
// For such a call the Gate files a Request with the control plane (the
// Desk). The Request says who calls and what: the call's canonical
// Document, its SHA-256 Digest, and an expiry. The agent is answered 403
// AUTH_ACTION_APPROVAL_REQUIRED. The owner approves in the dashboard with a
// WebAuthn assertion whose challenge is Challenge(Grant): the action id,
// this gateway, the digest, the expiry and how often the approval may be
// used. When the agent retries the same call, the Gate reads the decision
// and verifies the assertion against the owner's pinned Keys (WebAuthn
// Level 2 §7.2). Only then does the call pass, as many times as granted.
//
// The security property: a control plane that lies, a stolen dashboard
// session or a replayed approval cannot release a call. An approval counts
// only for a request this Gate filed, and only for the agent, subject,
// target and arguments it was filed for. It must come before the request
// ends, signed by a passkey the gateway pinned.
//
//	gate, err := approval.New(approval.Config{Gateway: key, Desk: desk, Keys: pinned})
//	...
//	err = gate.Admit(ctx, &approval.Call{Connection: "bank", Method: "POST", Path: "/pay", Arguments: body, …})
//
// The Gate keeps its holds (filed requests and verified approvals) in a
// Store. The default MemoryStore forgets them at a restart and shares
// them with no other process: a retry there files a new request. A fleet
// shares one Store, so an approval granted through any replica lets
// exactly its uses through across all of them. The Gate trusts a Store
// only to count: it checks each approval it reads against the pinned
// Keys, and the action id commits to the agent, subject and digest.
//
// The pinned Keys change only by the owner's KeysUpdate. It carries the
// whole new set, signed by a passkey already pinned over KeysChallenge.
// Keys.Apply accepts it only when newer, unexpired and for this gateway.
//
// docs/gateway.md ("Owner-approved actions") tells the flow and the
// pinning of keys; docs/threat-model.md what it stops.
package approval
