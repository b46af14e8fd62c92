package mcpproxy

import (
	"context"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/internal/mcpnotify"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The sessions of the MCP endpoint are one pool shared by every caller, so
// each caller gets a share of it: a key (namespace and key) may hold at
// most MaxSessionsPerKey sessions and a namespace MaxSessionsPerNamespace,
// both below MaxSessions. A caller opening a session past its own share
// evicts its own least recently used session instead of being refused, and
// a full pool does the same to the caller's namespace; only a caller whose
// namespace holds no session at all meets 503 MCP_SESSIONS_EXHAUSTED. A
// caller flooding the endpoint with sessions therefore churns through its
// own share and never takes one from anyone else.

// Defaults of the session limits (Config).
const (
	defaultMaxSessions             = 1000
	defaultMaxSessionsPerKey       = 32
	defaultMaxSessionsPerNamespace = 128
)

// sessionLimits are the session limits in force: 1 <= perKey <=
// perNamespace <= total.
type sessionLimits struct{ total, perKey, perNamespace int }

// newSessionLimits applies the defaults to the configured limits (zero or
// negative: the default) and caps each share by the one above it.
func newSessionLimits(total, perKey, perNamespace int) sessionLimits {
	l := sessionLimits{total: total, perKey: perKey, perNamespace: perNamespace}
	if l.total <= 0 {
		l.total = defaultMaxSessions
	}
	if l.perNamespace <= 0 {
		l.perNamespace = defaultMaxSessionsPerNamespace
	}
	if l.perKey <= 0 {
		l.perKey = defaultMaxSessionsPerKey
	}
	l.perNamespace = min(l.perNamespace, l.total)
	l.perKey = min(l.perKey, l.perNamespace)
	return l
}

// keyOwner is the caller a per-key share belongs to.
type keyOwner struct{ namespace, key string }

// sessionTable holds the endpoint's sessions, indexed by id, key and
// namespace. Its lock is never held while taking another.
type sessionTable struct {
	limits  sessionLimits
	metrics *metrics
	uses    atomic.Uint64 // orders the sessions' latest requests

	mu          sync.Mutex
	byID        map[string]*agentSession
	byKey       map[keyOwner]map[*agentSession]struct{}
	byNamespace map[string]map[*agentSession]struct{}
}

func newSessionTable(limits sessionLimits, m *metrics) sessionTable {
	return sessionTable{
		limits:      limits,
		metrics:     m,
		byID:        make(map[string]*agentSession),
		byKey:       make(map[keyOwner]map[*agentSession]struct{}),
		byNamespace: make(map[string]map[*agentSession]struct{}),
	}
}

func (t *sessionTable) lookup(id string) *agentSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// touch marks s as used now.
func (t *sessionTable) touch(s *agentSession) { s.lastUse.Store(t.uses.Add(1)) }

// add enters s, first removing the caller's least recently used sessions
// that its shares have no room for; it returns them, to be closed. It
// fails with ErrSessionsExhausted only when the pool is full and the
// caller's namespace holds none of it.
func (t *sessionTable) add(s *agentSession) ([]*agentSession, error) {
	t.touch(s)
	owner := keyOwner{s.caller.Namespace, s.caller.Key}
	t.mu.Lock()
	defer t.mu.Unlock()
	var evicted []*agentSession
	for len(t.byKey[owner]) >= t.limits.perKey {
		evicted = append(evicted, t.removeLRU(t.byKey[owner]))
	}
	for len(t.byNamespace[owner.namespace]) >= t.limits.perNamespace {
		evicted = append(evicted, t.removeLRU(t.byNamespace[owner.namespace]))
	}
	if len(t.byID) >= t.limits.total {
		if len(t.byNamespace[owner.namespace]) == 0 {
			return evicted, &RetryError{Err: ErrSessionsExhausted, RetryAfter: sessionsFullRetryAfter}
		}
		evicted = append(evicted, t.removeLRU(t.byNamespace[owner.namespace]))
	}
	t.byID[s.id] = s
	index(t.byKey, owner, s)
	index(t.byNamespace, owner.namespace, s)
	t.metrics.sessions.Inc()
	t.metrics.evictions.Add(float64(len(evicted)))
	return evicted, nil
}

// remove takes s out of the table; false if it was not in it.
func (t *sessionTable) remove(s *agentSession) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.removeLocked(s)
}

func (t *sessionTable) removeLocked(s *agentSession) bool {
	if t.byID[s.id] != s {
		return false
	}
	delete(t.byID, s.id)
	unindex(t.byKey, keyOwner{s.caller.Namespace, s.caller.Key}, s)
	unindex(t.byNamespace, s.caller.Namespace, s)
	t.metrics.sessions.Dec()
	return true
}

// removeLRU removes and returns the least recently used session of set,
// which is not empty. Callers hold t.mu.
func (t *sessionTable) removeLRU(set map[*agentSession]struct{}) *agentSession {
	var lru *agentSession
	for s := range set {
		if lru == nil || s.lastUse.Load() < lru.lastUse.Load() {
			lru = s
		}
	}
	t.removeLocked(lru)
	return lru
}

// all returns every session in the table.
func (t *sessionTable) all() []*agentSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*agentSession, 0, len(t.byID))
	for _, s := range t.byID {
		out = append(out, s)
	}
	return out
}

func index[K comparable](m map[K]map[*agentSession]struct{}, k K, s *agentSession) {
	set := m[k]
	if set == nil {
		set = make(map[*agentSession]struct{})
		m[k] = set
	}
	set[s] = struct{}{}
}

func unindex[K comparable](m map[K]map[*agentSession]struct{}, k K, s *agentSession) {
	delete(m[k], s)
	if len(m[k]) == 0 {
		delete(m, k)
	}
}

// open reserves a session for caller on conn, with a fresh id and its own
// server, evicting the caller's own sessions its shares have no room for.
func (e *endpoint) open(conn *Connection, caller Caller) (*agentSession, error) {
	s := &agentSession{id: rand.Text(), connID: conn.ID, caller: caller}
	s.conn.Store(conn)
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	if conn.ExposeResources {
		caps.Resources = &mcp.ResourceCapabilities{}
	}
	if conn.ExposePrompts {
		caps.Prompts = &mcp.PromptCapabilities{}
	}
	s.server = mcp.NewServer(serverInfo, &mcp.ServerOptions{
		Capabilities: caps,
		GetSessionID: func() string { return s.id },
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
	s.server.AddReceivingMiddleware(e.dispatch(s))
	s.server.AddSendingMiddleware(mcpnotify.Sending)

	evicted, err := e.sessions.add(s)
	for _, v := range evicted {
		e.evict(v)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// evict ends a session the table no longer holds: its SDK session is
// closed, now or by settle when it has none yet, and its watcher then
// closes its upstream session.
func (e *endpoint) evict(s *agentSession) {
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
func (e *endpoint) settle(s *agentSession) {
	var ss *mcp.ServerSession
	for x := range s.server.Sessions() {
		ss = x
	}
	if ss == nil || ss.InitializeParams() == nil {
		e.sessions.remove(s)
		e.p.endUpstream(&s.upstream)
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
		e.sessions.remove(s)
		e.p.endUpstream(&s.upstream)
	}()
	// Evicted while its initialize was answered: evict saw no SDK session
	// to close, or closes it too (Close may be called twice).
	if s.evicted.Load() {
		_ = ss.Close()
	}
}

// closeAll ends every session and waits until all are gone.
func (e *endpoint) closeAll() {
	e.endStreams()
	for _, s := range e.sessions.all() {
		if ss := s.ss.Load(); ss != nil {
			_ = ss.Close()
		}
	}
	e.wg.Wait()
}
