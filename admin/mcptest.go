package admin

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/internal/apierror"
)

// MCPHandshake is what the test of an mcp connection learned (see
// Config.TestMCP), answered as the test result's mcp member.
type MCPHandshake struct {
	// ServerName, ServerVersion and ProtocolVersion are from the server's
	// initialize answer; empty when initialize failed.
	ServerName      string `json:"server_name"`
	ServerVersion   string `json:"server_version"`
	ProtocolVersion string `json:"protocol_version"`
	// Tools is the number of tools the server lists.
	Tools int `json:"tools"`
	// Status is the HTTP status of the server's last answer, answered as
	// the test result's status; 0 when none came.
	Status int `json:"-"`
}

// mcpTestResult is the test route's answer for an mcp connection: the
// result every test gives, and what the handshake learned once
// initialize succeeded.
type mcpTestResult struct {
	credvault.TestResult
	MCP *MCPHandshake `json:"mcp,omitempty"`
}

// testMCP tests c with Config.TestMCP and records the outcome as the
// connection's last_test, as an HTTP probe is.
func (h *Handler) testMCP(w http.ResponseWriter, r *http.Request, c *credvault.Connection) {
	ctx := r.Context()
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, credvault.DefaultTestTimeout)
		defer cancel()
	}
	start := time.Now()
	hs, err := h.cfg.TestMCP(ctx, c)
	if errors.Is(err, credvault.ErrNotFound) { // deleted meanwhile
		writeError(w, r, h.log, err)
		return
	}
	res := mcpTestResult{TestResult: credvault.TestResult{
		OK: err == nil, Status: hs.Status, LatencyMS: time.Since(start).Milliseconds(), TestedAt: time.Now().UTC(),
	}}
	if err != nil {
		res.Error = err.Error()
	}
	if hs.ServerName != "" || hs.ProtocolVersion != "" {
		res.MCP = &hs
	}
	// Recorded even when the caller has gone: the handshake did happen.
	if err := h.cfg.Vault.RecordTest(context.WithoutCancel(ctx), c.ID, res.TestResult); err != nil {
		writeError(w, r, h.log, err)
		return
	}
	h.log.Info("admin: connection tested", "connection", c.ID, "ok", res.OK, "status", res.Status, "protocol", c.Protocol, "request_id", apierror.RequestIDFrom(r.Context()))
	apierror.WriteJSON(w, http.StatusOK, res)
}
