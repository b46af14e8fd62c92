package engine

import (
	"context"
	"net/http"
	"sync"
)

// SubjectSessions bounds the upstream sessions a connection whose
// credential is per subject (Connection.PerSubject) keeps for the REST
// routes and discovery: one per subject, the least recently used closed
// past it.
const SubjectSessions = 128

// subjects are the upstream sessions of a per-subject connection's REST
// routes and discovery, by subject. A server may bind a session to the
// user whose token opened it (the go-sdk's refuses another user's token
// on it), so subjects never share one.
type subjects struct {
	mu   sync.Mutex
	byID map[string]*subjectUpstream
	uses uint64 // orders the sessions' latest uses
}

type subjectUpstream struct {
	Upstream
	lastUse uint64
}

// subjectKey carries the subject of the request the engine serves.
type subjectKey struct{}

// withSubject records subject in ctx, for Guarded to choose its session.
func withSubject(ctx context.Context, subject string) context.Context {
	return context.WithValue(ctx, subjectKey{}, subject)
}

// sharedUpstream is the upstream session of the REST routes and
// discovery for ctx's request: the connection's shared one, or with a
// per-subject credential the one of the request's subject.
func (p *Engine) sharedUpstream(ctx context.Context, st *Conn) *Upstream {
	if !st.perSubject.Load() {
		return &st.shared
	}
	subject, _ := ctx.Value(subjectKey{}).(string)
	u, evicted := st.subjects.get(subject, func() *subjectUpstream {
		u := &subjectUpstream{Upstream: Upstream{state: SessionInitializeRequired}}
		// The server's requests on it are held as on the shared session.
		u.tap = func(hc *http.Client) *http.Client {
			return &http.Client{Transport: st.held.Transport(hc.Transport), CheckRedirect: hc.CheckRedirect}
		}
		return u
	})
	if evicted != nil {
		// Outside s.mu: a request may hold it while it connects.
		p.EndUpstream(&evicted.Upstream)
	}
	return &u.Upstream
}

// get returns subject's session, made by open when there is none, and the
// least recently used one it removed to make room (nil: none).
func (s *subjects) get(subject string, open func() *subjectUpstream) (u, evicted *subjectUpstream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uses++
	if u, ok := s.byID[subject]; ok {
		u.lastUse = s.uses
		return u, nil
	}
	if s.byID == nil {
		s.byID = map[string]*subjectUpstream{}
	}
	if len(s.byID) >= SubjectSessions {
		var lruID string
		for id, u := range s.byID {
			if evicted == nil || u.lastUse < evicted.lastUse {
				evicted, lruID = u, id
			}
		}
		delete(s.byID, lruID)
	}
	u = open()
	u.lastUse = s.uses
	s.byID[subject] = u
	return u, evicted
}

// flightContext is what a discovery flight started by ctx's request runs
// under: the request's values (its caller, whose credential the transport
// sends) when the credential is per subject, else none.
func flightContext(ctx context.Context, st *Conn) context.Context {
	if st.perSubject.Load() {
		return context.WithoutCancel(ctx)
	}
	return context.Background()
}

// endSubjects closes the per-subject sessions of st.
func (p *Engine) endSubjects(st *Conn) {
	s := &st.subjects
	s.mu.Lock()
	all := s.byID
	s.byID = nil
	s.mu.Unlock()
	for _, u := range all {
		p.EndUpstream(&u.Upstream)
	}
}
