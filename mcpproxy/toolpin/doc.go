// Package toolpin keeps the approved definition of each tool of an MCP
// connection. A server may change a tool after the owner approved it: its
// description, to smuggle instructions; its schema, to widen what it
// does. Pinned, the change reaches no agent until someone reviews it.
//
// A Definition is what the server tells an agent about a tool: name,
// title, description, input and output schema, annotations. Its Hash is
// the SHA-256 of its canonical JSON (Canonical, after RFC 8785), so the
// hash does not depend on member order, spacing or number spelling.
// A Record keeps, per connection, the pinned definitions and those seen
// since that wait for review:
//
//	next, events := rec.Observe(listed, true, now)
//	if next.Allows(tool.Name, hash) { /* list it, call it */ }
//
// The first complete listing of a connection pins every tool it lists
// (trust on first use); afterwards a changed or new tool waits in
// Pending until Accept names the hash the reviewer saw, or Reject refuses
// it: a rejected definition stays hidden and is not offered again. A tool
// the server stops listing keeps its pin. docs/gateway.md tells the story.
package toolpin
