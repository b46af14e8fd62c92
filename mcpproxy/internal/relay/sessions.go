package relay

import (
	"context"
	"time"

	"github.com/idnhq/idn/internal/mcpnotify"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy/internal/engine"
	"github.com/idnhq/idn/mcpproxy/internal/hold"
	"github.com/idnhq/idn/mcpproxy/internal/pool"
	"github.com/idnhq/idn/mcpproxy/internal/resume"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The sessions of the MCP endpoint are one pool shared by every caller, in
// which each caller gets a share (package pool): a caller that opens a
// session past its share evicts its own least recently used one; only a
// caller whose namespace holds none in a full pool meets 503
// MCP_SESSIONS_EXHAUSTED.

// open reserves a session for caller on conn, with a fresh id and its own
// server, evicting the caller's own sessions its shares have no room for.
func (e *Endpoint) open(conn *engine.Connection, caller mcpevent.Caller) (*agentSession, error) {
	s := &agentSession{slot: pool.Slot{ID: e.newSessionID(), Owner: pool.Owner{Namespace: caller.Namespace, Key: caller.Key}}, connID: conn.ID, caller: caller, events: resume.NewLog()}
	s.conn.Store(conn)
	// The server's requests take places in the session's gate and in its
	// connection's (none when the connection cannot be reached).
	var perConnection *hold.Gate
	refused := func() {}
	if st, err := e.eng.State(conn); err == nil {
		perConnection, refused = st.Asking, func() { e.eng.Refused(st) }
	}
	s.hold = hold.NewSession(hold.NewGate(hold.PerSession, perConnection, refused), min(hold.ReplyTimeout, e.eng.Timeout()))
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	if conn.ExposeResources {
		caps.Resources = &mcp.ResourceCapabilities{}
	}
	if conn.ExposePrompts {
		caps.Prompts = &mcp.PromptCapabilities{}
	}
	s.server = mcp.NewServer(serverInfo, &mcp.ServerOptions{
		Capabilities: caps,
		GetSessionID: func() string { return s.slot.ID },
		SubscribeHandler: func(ctx context.Context, r *mcp.SubscribeRequest) error {
			return e.forward(ctx, s, s.conn.Load(), func(ctx context.Context, cs *mcp.ClientSession) error {
				return cs.Subscribe(ctx, &mcp.SubscribeParams{Meta: r.Params.Meta, URI: r.Params.URI})
			})
		},
		UnsubscribeHandler: func(ctx context.Context, r *mcp.UnsubscribeRequest) error {
			return e.forward(ctx, s, s.conn.Load(), func(ctx context.Context, cs *mcp.ClientSession) error {
				return cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{Meta: r.Params.Meta, URI: r.Params.URI})
			})
		},
	})
	e.addTaskMethods(s)
	s.server.AddReceivingMiddleware(e.dispatch(s))
	s.server.AddSendingMiddleware(mcpnotify.Sending)

	evicted, ok := e.sessions.Add(s)
	for _, v := range evicted {
		e.evict(v)
	}
	if !ok {
		return nil, &engine.RetryError{Err: engine.ErrSessionsExhausted, RetryAfter: sessionsFullRetryAfter}
	}
	return s, nil
}

// evict ends a session the table no longer holds: its SDK session is
// closed, now or by settle when it has none yet, and its watcher then
// closes its upstream session.
func (e *Endpoint) evict(s *agentSession) {
	if e.lanes.drop(s) {
		return
	}
	s.evicted.Store(true)
	if ss := s.ss.Load(); ss != nil {
		// Close waits for the session's requests in flight; the caller
		// opening a session does not.
		go func() { _ = ss.Close() }()
	}
}

// settle runs after the request that opened s: a session the SDK kept is
// watched until it ends (idle timeout, DELETE, eviction, Close); anything
// else (a refused or failed initialize) frees the reservation now.
func (e *Endpoint) settle(s *agentSession) {
	var ss *mcp.ServerSession
	for x := range s.server.Sessions() {
		ss = x
	}
	if ss == nil || ss.InitializeParams() == nil {
		e.sessions.Remove(s)
		e.eng.EndUpstream(&s.upstream)
		s.hold.End()
		return
	}
	s.ss.Store(ss)
	if e.idle > 0 {
		s.mu.Lock()
		s.timer = time.AfterFunc(e.idle, func() { _ = ss.Close() })
		if s.active > 0 {
			s.timer.Stop()
		}
		s.mu.Unlock()
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_ = ss.Wait()
		s.mu.Lock()
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
		s.mu.Unlock()
		e.sessions.Remove(s)
		e.eng.EndUpstream(&s.upstream)
		// What the server still makes it hold (answers being posted,
		// event streams) ends with it.
		s.hold.End()
	}()
	// Evicted while its initialize was answered: evict saw no SDK session
	// to close, or closes it too (Close may be called twice).
	if s.evicted.Load() {
		_ = ss.Close()
	}
}

// Close ends every session and waits until all are gone; the upstream
// sessions are the engine's to close.
func (e *Endpoint) Close() {
	e.endStreams()
	e.lanes.dropAll()
	for _, s := range e.sessions.All() {
		if ss := s.ss.Load(); ss != nil {
			_ = ss.Close()
		}
	}
	e.wg.Wait()
}
