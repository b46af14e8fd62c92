package upstream

import (
	"context"
	"encoding/json"
	"io"
	"sync"

	"github.com/idnhq/idn/mcpproxy/internal/hold"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
)

// asks are the server's requests of one call being answered: each in a
// goroutine of its own, so that the call's stream is read on while the
// agent is asked, and what comes next (a notifications/cancelled that
// withdraws the request, the call's result) is seen. A withdrawn
// request's context ends, which tells the agent that was asked, and its
// answer is not posted; the rest end with the call.
type asks struct {
	ctx    context.Context // the call's asks; ends with the call
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	byID map[string]*ask
}

// ask is one request being answered.
type ask struct {
	cancel    context.CancelCauseFunc
	done      chan struct{}
	withdrawn bool
}

func newAsks(ctx context.Context) *asks {
	a := &asks{byID: map[string]*ask{}}
	a.ctx, a.cancel = context.WithCancel(ctx)
	return a
}

// answer has h answer msg, a request of the server read from the call's
// stream on s, and posts the answer, within hold.ReplyTimeout, unless the
// request was withdrawn or the call ended first; then gives its place
// back (leave).
func (a *asks) answer(s Session, h Handler, msg wire.Incoming, leave func()) {
	ctx, cancel := context.WithCancelCause(a.ctx)
	q := &ask{cancel: cancel, done: make(chan struct{})}
	key, ok := wire.IDKey(msg.ID)
	a.mu.Lock()
	if _, dup := a.byID[key]; ok && !dup {
		a.byID[key] = q
	} else {
		ok = false // answered, but not withdrawable: its id is not one
	}
	a.mu.Unlock()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer leave()
		defer close(q.done)
		defer cancel(nil)
		reply := h.Answer(ctx, msg)
		a.mu.Lock()
		if ok {
			delete(a.byID, key)
		}
		withdrawn := q.withdrawn
		a.mu.Unlock()
		if withdrawn || ctx.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, hold.ReplyTimeout)
		defer cancel()
		if resp, err := post(ctx, s, reply); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, refusalPeek))
			resp.Body.Close()
		}
	}()
}

// withdraw ends the request that params, those of the server's
// notifications/cancelled, name, when it is one of the call's being
// answered (its context's cause wire.ErrWithdrawn), and waits until its
// answering has stopped, so that the agent is told before anything the
// stream carries next. A notification naming
// any other request is dropped.
func (a *asks) withdraw(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	key, ok := wire.IDKey(p.RequestID)
	if !ok {
		return
	}
	a.mu.Lock()
	q := a.byID[key]
	if q != nil {
		q.withdrawn = true
		delete(a.byID, key)
	}
	a.mu.Unlock()
	if q != nil {
		q.cancel(wire.ErrWithdrawn)
		<-q.done
	}
}

// end ends the requests still being answered, as the call has, and waits
// for their goroutines.
func (a *asks) end() {
	a.cancel()
	a.wg.Wait()
}
