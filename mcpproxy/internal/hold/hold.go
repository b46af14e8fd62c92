// Package hold bounds what an upstream MCP server can make the gateway
// hold for it. Each request the server sends (ping, sampling, elicitation,
// roots, the client side of tasks) is answered in a goroutine. Its answer
// is posted in an HTTP exchange of its own. A server that writes
// thousands of them and never answers the posts would hold as many
// goroutines, connections and descriptors.
//
// So a Gate counts the server's requests being answered: at most
// PerSession for one agent session, PerConnection for all the sessions
// of one connection. A request past either is dropped unread and
// counted; a server must cope with a request left unanswered. Every answer is
// posted within ReplyTimeout, and a Session's Transport ends every
// exchange of an agent session's upstream session when the session ends.
// docs/threat-model.md lists the bounds.
package hold

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
)

// The bounds.
const (
	// PerSession is how many of the server's requests one agent session
	// answers at once: more than an agent asks a human at a time.
	PerSession = 16
	// PerConnection is how many all the sessions of one connection (and
	// its REST routes) answer at once.
	PerConnection = 256
	// ReplyTimeout bounds the posting of one answer, or of a session's
	// DELETE: a server takes them at once.
	ReplyTimeout = 10 * time.Second
)

// ErrEnded is the error of an exchange of a session that has ended.
var ErrEnded = errors.New("mcpproxy: the MCP session ended")

// Gate counts the server's requests being answered, up to a cap, and its
// parent's.
type Gate struct {
	max     int
	parent  *Gate
	refused func()

	mu sync.Mutex
	n  int
}

// NewGate returns a gate of max places under parent (nil: none);
// refused (nil: nothing) is told of each request it turns away.
func NewGate(max int, parent *Gate, refused func()) *Gate {
	return &Gate{max: max, parent: parent, refused: refused}
}

// Enter takes a place in g and in its parents, and returns leave, which
// gives them back (once); ok is false, and nothing is taken, when any of
// them is full.
func (g *Gate) Enter() (leave func(), ok bool) {
	for x := g; x != nil; x = x.parent {
		if !x.take() {
			for y := g; y != x; y = y.parent {
				y.give()
			}
			if g.refused != nil {
				g.refused()
			}
			return nil, false
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for x := g; x != nil; x = x.parent {
				x.give()
			}
		})
	}, true
}

func (g *Gate) take() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n >= g.max {
		return false
	}
	g.n++
	return true
}

func (g *Gate) give() {
	g.mu.Lock()
	g.n--
	g.mu.Unlock()
}

// Session is what one agent session's upstream session holds: a gate of
// its own, the server's requests its Transport let through until their
// answers are posted, and its life.
type Session struct {
	gate  *Gate
	ctx   context.Context // done when the session ends
	end   context.CancelFunc
	reply time.Duration

	mu        sync.Mutex
	answering map[string]func() // by askKey: the place's leave
}

// NewSession returns the hold of a session whose requests take places
// in gate, each answer posted within reply (zero: ReplyTimeout).
func NewSession(gate *Gate, reply time.Duration) *Session {
	s := &Session{gate: gate, reply: reply, answering: map[string]func(){}}
	if s.reply <= 0 {
		s.reply = ReplyTimeout
	}
	s.ctx, s.end = context.WithCancel(context.Background())
	return s
}

// Enter takes a place for a server's request the caller answers itself.
func (s *Session) Enter() (leave func(), ok bool) { return s.gate.Enter() }

// End ends the session: every exchange of its Transport in flight ends,
// later ones fail with ErrEnded (but the DELETE that closes the upstream
// session), and every place is given back.
func (s *Session) End() {
	s.end()
	s.mu.Lock()
	answering := s.answering
	s.answering = map[string]func(){}
	s.mu.Unlock()
	for _, leave := range answering {
		leave()
	}
}

// Unanswered gives back the place of request id of upstream session
// session, which is not answered after all (the server withdrew it).
func (s *Session) Unanswered(session string, id json.RawMessage) {
	if key, ok := askKey(session, id); ok {
		s.answered(key)
	}
}

func (s *Session) answered(key string) {
	s.mu.Lock()
	leave := s.answering[key]
	delete(s.answering, key)
	s.mu.Unlock()
	if leave != nil {
		leave()
	}
}

// admit reports whether data, an event read from upstream session
// session, may pass: anything but a request does; a request does when
// it gets a place, and keeps it until its answer is posted. A request
// whose id is none, or is being answered, is dropped.
func (s *Session) admit(session string, data []byte) bool {
	if !bytes.Contains(data, []byte(`"method"`)) {
		return true
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(data, &msg) != nil || msg.Method == "" || msg.ID == nil {
		return true
	}
	key, ok := askKey(session, msg.ID)
	if !ok {
		return false
	}
	// One lock from the check to the record, so that neither a second
	// copy of the request nor End comes between them.
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.answering[key]; dup || s.ctx.Err() != nil {
		return false
	}
	leave, ok := s.gate.Enter()
	if ok {
		s.answering[key] = leave
	}
	return ok
}

// Transport returns base under the session's bounds: each request ends
// when the session ends; an answer to the server's request is posted
// within the reply timeout and gives its place back; the requests the
// server writes on an event stream pass only with a place (admit).
func (s *Session) Transport(base http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		session := req.Header.Get("Mcp-Session-Id")
		var answers string // the askKey of the request req answers
		if req.Method == http.MethodPost && req.Body != nil && s.holding() {
			body, err := io.ReadAll(req.Body)
			_ = req.Body.Close()
			if err != nil {
				return nil, err
			}
			answers = answerKey(session, body)
			req = req.Clone(req.Context())
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		if answers != "" {
			defer s.answered(answers)
		}
		var ctx context.Context
		var cancel context.CancelFunc
		switch {
		case req.Method == http.MethodDelete || answers != "":
			// A DELETE closes the upstream session, after the session
			// ended.
			ctx, cancel = context.WithTimeout(req.Context(), s.reply)
		case s.ctx.Err() != nil:
			return nil, ErrEnded
		default:
			ctx, cancel = context.WithCancel(req.Context())
		}
		end := cancel
		if req.Method != http.MethodDelete {
			stop := context.AfterFunc(s.ctx, cancel)
			end = func() { stop(); cancel() }
		}
		resp, err := base.RoundTrip(req.WithContext(ctx))
		if err != nil {
			end()
			return nil, err
		}
		body := resp.Body
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			body = mcptasks.Divert(body, func(data []byte) bool { return !s.admit(session, data) })
		}
		resp.Body = &endingBody{ReadCloser: body, end: end}
		return resp, nil
	})
}

// holding reports whether any request is being answered.
func (s *Session) holding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.answering) > 0
}

// answerKey is the askKey of the request body answers, "" when body is
// no answer.
func answerKey(session string, body []byte) string {
	var msg wire.Incoming
	if json.Unmarshal(body, &msg) != nil || msg.Method != "" || msg.Result == nil && msg.Error == nil {
		return ""
	}
	key, _ := askKey(session, msg.ID)
	return key
}

// askKey keys request id of upstream session session; ok is false for
// an id that is none.
func askKey(session string, id json.RawMessage) (string, bool) {
	k, ok := wire.IDKey(id)
	return session + " " + k, ok
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// endingBody ends its exchange's context when closed.
type endingBody struct {
	io.ReadCloser
	end  context.CancelFunc
	once sync.Once
}

func (b *endingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.end)
	return err
}
