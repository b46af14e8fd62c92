package main

//lint:file-ignore SA1019 Clients of protocol versions up to 2025-11-25 show log messages, which the SDK deprecates for the newer one; telling them why a call waits is the point.

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/internal/mcpnotify"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// heldAction reads a gateway's refusal of a tools/call it holds for the
// owner's passkey approval: the action's id and expiry.
func heldAction(err error) (id string, expires time.Time, held bool) {
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return "", time.Time{}, false
	}
	var data struct {
		Code      string    `json:"code"`
		ActionID  string    `json:"action_id"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if json.Unmarshal(je.Data, &data) != nil || data.Code != errcode.AuthActionApprovalRequired.String() || data.ActionID == "" {
		return "", time.Time{}, false
	}
	return data.ActionID, data.ExpiresAt, true
}

// callHeld runs a tools/call. While the gateway holds it for the owner's
// passkey approval, it tells the stdio client once per action (a log
// message) and calls again every retry, with the same arguments, until
// the call passes, the owner denies it (AUTH_ACTION_DENIED, returned as
// the gateway answered it), or the action would expire first.
func (b *bridge) callHeld(ctx context.Context, session mcp.Session, op func(*mcp.ClientSession) (mcp.Result, error)) (mcp.Result, error) {
	every := b.retry
	if every <= 0 {
		every = defaultRetry
	}
	told := ""
	for {
		res, err := b.call(ctx, op, false)
		id, expires, held := heldAction(err)
		if !held || !time.Now().Add(every).Before(expires) {
			return res, err
		}
		if id != told {
			told = id
			if ss, ok := session.(*mcp.ServerSession); ok {
				_ = mcpnotify.Send(ctx, ss, "notifications/message", &mcp.LoggingMessageParams{Level: "warning", Logger: "idn",
					Data: "idn: the gateway holds this call until the namespace owner approves it with a passkey (action " + id +
						", in the dashboard's Actions page) before " + expires.UTC().Format(time.RFC3339) + "; idn asks again every " + every.String() + "."})
			}
		}
		t := time.NewTimer(every)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}
