package mcpproxy

import "github.com/idnhq/idn/mcpproxy/internal/engine"

// SubjectSessions bounds the upstream sessions a connection with
// Connection.PerSubject keeps for the REST routes and discovery, one per
// subject: past it, the least recently used is closed.
const SubjectSessions = engine.SubjectSessions
