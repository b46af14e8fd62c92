package engine

import (
	"context"
	"net/http"
	"time"

	"github.com/idnhq/idn/mcpevent"
)

// observe tells Config.OnUpstream of one exchange, when set.
func (p *Engine) observe(ctx context.Context, connID string, req *http.Request, resp *http.Response, err error, start time.Time) {
	if p.onUpstream == nil {
		return
	}
	e := mcpevent.Exchange{ConnectionID: connID, Method: req.Method, Err: err, Elapsed: time.Since(start)}
	if resp != nil {
		e.Status = resp.StatusCode
	}
	p.onUpstream(ctx, e)
}

// decide tells Config.OnDecision of one decision, when set.
func (p *Engine) Decide(ctx context.Context, conn *Connection, caller mcpevent.Caller, method, tool, outcome string, err error) {
	if p.onDecision == nil {
		return
	}
	e := mcpevent.Decision{ConnectionID: conn.ID, Caller: caller, Method: method, Tool: tool, Outcome: outcome}
	if err != nil {
		e.Code = ToAPIError(err).Code().String()
	}
	p.onDecision(ctx, e)
}

// Outcome is the outcome of a listing that ended with err.
func Outcome(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}
