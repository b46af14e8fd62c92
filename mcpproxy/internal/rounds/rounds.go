// Package rounds turns a call that its server interrupts with requests
// (elicitation, sampling, roots on a 2025-11-25 session) into the
// multi-round-trip results of MCP 2026-07-28: the call runs on while its
// agent is asked, each question goes back as an input_required result,
// and the agent's retry carrying inputResponses answers it.
//
// A requestState names a call held in this process, bound to the owner
// that started it (connection, caller and tool). It is single use: each
// round hands out a fresh one. A retry naming an unknown, spent or
// foreign state is refused with ErrUnknownState, the same answer for all
// three, so states cannot be probed.
package rounds

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"
)

// ErrUnknownState: a retry named a requestState that this process does not
// hold for its owner (unknown, already used, expired, or another's).
var ErrUnknownState = errors.New("rounds: unknown or spent requestState")

// ErrNotAnswered is what the server hears when the agent retried without
// an answer to its request, or never retried.
var ErrNotAnswered = errors.New("rounds: the agent did not answer")

// Question is one request of the server put to the agent.
type Question struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// Outcome is one round's answer to the agent: the call's result (Done),
// or the questions it must answer before retrying with State.
type Outcome struct {
	Done      bool
	Result    any // the call's result, when Done
	Err       error
	Questions map[string]Question
	State     string
}

// Run is the call: ask puts a question to the agent and returns its
// answer as the agent wrote it.
type Run func(ctx context.Context, ask func(context.Context, Question) (json.RawMessage, error)) (any, error)

// Table holds the calls waiting for their agents' retries.
type Table struct {
	// Wait is how long a call waits for its agent's retry; the call is
	// abandoned after it.
	Wait time.Duration

	mu      sync.Mutex
	byState map[string]*call
}

type pending struct {
	q     Question
	reply chan answer
}

type answer struct {
	raw json.RawMessage
	err error
}

type call struct {
	owner  string
	cancel context.CancelFunc
	asked  chan *pending
	done   chan struct{}
	result any
	err    error

	seq    int
	open   map[string]*pending // asked of the agent, not yet answered
	expiry *time.Timer
}

// Start runs run for owner, detached from ctx's cancellation but within
// limit, and returns its first round.
func (t *Table) Start(ctx context.Context, owner string, limit time.Duration, run Run) Outcome {
	runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	c := &call{owner: owner, cancel: cancel, asked: make(chan *pending), done: make(chan struct{}), open: map[string]*pending{}}
	go func() {
		defer close(c.done)
		defer cancel()
		c.result, c.err = run(runCtx, c.ask)
	}()
	return t.next(ctx, c)
}

// Resume continues the call state names with the agent's answers, keyed
// by the ids of the questions it was given.
func (t *Table) Resume(ctx context.Context, owner, state string, answers map[string]json.RawMessage) (Outcome, error) {
	t.mu.Lock()
	c, ok := t.byState[state]
	if ok && c.owner == owner {
		delete(t.byState, state)
	}
	t.mu.Unlock()
	if !ok || c.owner != owner {
		return Outcome{}, ErrUnknownState
	}
	c.expiry.Stop()
	for id, p := range c.open {
		if raw, ok := answers[id]; ok {
			p.reply <- answer{raw: raw}
		} else {
			p.reply <- answer{err: ErrNotAnswered}
		}
		delete(c.open, id)
	}
	return t.next(ctx, c), nil
}

// ask is the call's side: it waits for the agent's answer to q.
func (c *call) ask(ctx context.Context, q Question) (json.RawMessage, error) {
	p := &pending{q: q, reply: make(chan answer, 1)}
	select {
	case c.asked <- p:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case a := <-p.reply:
		return a.raw, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// next waits for the call's result or its next questions. Questions the
// server sends together go out in one round. When the agent's request
// ends first, the call is abandoned.
func (t *Table) next(ctx context.Context, c *call) Outcome {
	select {
	case <-c.done:
		return Outcome{Done: true, Result: c.result, Err: c.err}
	case p := <-c.asked:
		c.add(p)
	case <-ctx.Done():
		c.cancel()
		<-c.done
		return Outcome{Done: true, Result: c.result, Err: c.err}
	}
	for more := true; more; {
		select {
		case p := <-c.asked:
			c.add(p)
		default:
			more = false
		}
	}
	out := Outcome{Questions: make(map[string]Question, len(c.open)), State: rand.Text()}
	for id, p := range c.open {
		out.Questions[id] = p.q
	}
	// The state and its expiry are set together, under the lock a retry
	// takes to find the call.
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byState == nil {
		t.byState = map[string]*call{}
	}
	t.byState[out.State] = c
	c.expiry = time.AfterFunc(t.Wait, func() {
		t.mu.Lock()
		_, held := t.byState[out.State]
		delete(t.byState, out.State)
		t.mu.Unlock()
		if held {
			// No retry came: the call is abandoned, and its server hears
			// that its requests were not answered.
			c.cancel()
		}
	})
	return out
}

func (c *call) add(p *pending) {
	c.seq++
	c.open[strconv.Itoa(c.seq)] = p
}
