package clienttasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/idnhq/idn/mcpproxy/internal/hold"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The SDK's client reads the upstream session's own event stream, and the
// streams of the requests it sends: a server's request of the client side
// of tasks there would be answered without its task, or "method not
// found". Those requests are taken out of the stream before the SDK reads
// it (mcptasks.Divert), and answered by the relay.

// Asker relays a server's request of method with params to the agent and
// returns its answer (the endpoint's ask).
type Asker func(ctx context.Context, method string, params json.RawMessage) (any, error)

// answer has ask answer msg, a request read from the stream of req, and
// posts the answer to the server with base: in ctx carrying its upstream
// session, ending with that stream, after timeout, or when the server
// withdraws the request (withdraw), which is then not answered.
func (r *Relay) answer(req *http.Request, base http.RoundTripper, timeout time.Duration, ask Asker, msg wire.Incoming) {
	withdrawable, withdraw := context.WithCancelCause(context.Background())
	defer withdraw(nil)
	ctx, cancel := context.WithTimeout(withdrawable, timeout)
	defer cancel()
	defer context.AfterFunc(req.Context(), cancel)()
	up := Upstream{ID: req.Header.Get("Mcp-Session-Id"), Version: req.Header.Get("Mcp-Protocol-Version")}
	if key, ok := askKey(up.ID, msg.ID); ok {
		a := &asking{withdraw: withdraw}
		if _, taken := r.asking.LoadOrStore(key, a); !taken {
			defer r.asking.CompareAndDelete(key, a)
		}
	}
	reply := wire.Response{JSONRPC: "2.0", ID: msg.ID}
	res, err := ask(WithUpstream(ctx, up), msg.Method, msg.Params)
	if context.Cause(ctx) == errWithdrawn {
		return
	}
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpproxy: " + msg.Method + " was not answered"}
		}
		reply.Error = je
	} else {
		reply.Result = res
	}
	body, err := json.Marshal(reply)
	if err != nil {
		return
	}
	// Posted even when the asking ended (the server is told why), within
	// a deadline of its own.
	postCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hold.ReplyTimeout)
	defer cancel()
	post, err := http.NewRequestWithContext(postCtx, http.MethodPost, req.URL.String(), bytes.NewReader(body))
	if err != nil {
		return
	}
	post.Header.Set("Content-Type", "application/json")
	post.Header.Set("Accept", "application/json, text/event-stream")
	post.Header.Set("Mcp-Session-Id", up.ID)
	post.Header.Set("Mcp-Protocol-Version", up.Version)
	if resp, err := base.RoundTrip(post); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, replyPeek))
		resp.Body.Close()
	}
}

// replyPeek bounds how much of the server's answer to a post is read.
const replyPeek = 64 << 10

// asking is a server's request being answered, which the server may
// withdraw.
type asking struct{ withdraw context.CancelCauseFunc }

// errWithdrawn ends the answering of a request the server withdrew.
var errWithdrawn = errors.New("clienttasks: the server withdrew its request")

// askKey is the key in Relay.asking of the request id of upstream session
// session; ok is false for an id that is none.
func askKey(session string, id json.RawMessage) (key string, ok bool) {
	k, ok := wire.IDKey(id)
	return session + " " + k, ok
}

// withdraw ends the answering of the request of upstream session session
// that data, a server's notifications/cancelled, names; a notification
// naming any other request changes nothing.
func (r *Relay) withdraw(session string, data []byte) {
	var msg wire.Incoming
	if json.Unmarshal(data, &msg) != nil || msg.Method != "notifications/cancelled" || msg.ID != nil {
		return
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(msg.Params, &p) != nil {
		return
	}
	if key, ok := askKey(session, p.RequestID); ok {
		if a, ok := r.asking.LoadAndDelete(key); ok {
			a.(*asking).withdraw(errWithdrawn)
		}
	}
}
