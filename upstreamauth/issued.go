package upstreamauth

import (
	"sync"
	"time"
)

// IssuedRetention is how long Tokens.Issued lists an access token after
// Token last handed it out: longer than an answer to a request sent with
// it takes to arrive.
const IssuedRetention = time.Hour

// issued is the access tokens handed out for one connection's accounts.
type issued struct {
	mu     sync.Mutex
	seen   map[string]time.Time // token value: when last handed out
	list   []string             // seen's keys; nil after a change
	pruned time.Time
}

// note records that token was handed out for connection conn.
func (t *Tokens) note(conn, token string) {
	v, ok := t.issued.Load(conn)
	if !ok {
		v, _ = t.issued.LoadOrStore(conn, &issued{seen: map[string]time.Time{}})
	}
	s := v.(*issued)
	now := t.cfg.Clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[token]; !ok {
		s.list = nil
	}
	s.seen[token] = now
	if now.Sub(s.pruned) < IssuedRetention/4 {
		return
	}
	s.pruned = now
	for tok, at := range s.seen {
		if now.Sub(at) > IssuedRetention {
			delete(s.seen, tok)
			s.list = nil
		}
	}
}

// Issued returns the access tokens Token handed out for connection conn's
// accounts within IssuedRetention, for a proxy to remove from what the
// upstream answers however it escaped them. The slice is shared: do not
// modify it.
func (t *Tokens) Issued(conn string) []string {
	v, ok := t.issued.Load(conn)
	if !ok {
		return nil
	}
	s := v.(*issued)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.list == nil {
		s.list = make([]string, 0, len(s.seen))
		for tok := range s.seen {
			s.list = append(s.list, tok)
		}
	}
	return s.list
}
