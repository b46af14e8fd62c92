package admin

import (
	"context"
	"net/http"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
)

// ToolPins reviews and accepts the pinned tool definitions of MCP
// connections, for the tool-pins routes. The gateway's keeps them beside
// each connection in its vault (package toolpin).
type ToolPins interface {
	// Review returns what connectionID has pinned and what waits for
	// review, answered as JSON.
	Review(ctx context.Context, connectionID string) (any, error)
	// Accept pins the waiting definitions tools names (tool name → the
	// hash the reviewer saw) as accepted by by, all or none, and returns
	// Review's answer. A hash that no longer waits is an error carrying
	// its code (errcode.Error).
	Accept(ctx context.Context, connectionID string, tools map[string]string, by string) (any, error)
	// Reject refuses the waiting definitions tools names as Accept
	// pins them: the tools stay hidden, and those definitions are not
	// offered again.
	Reject(ctx context.Context, connectionID string, tools map[string]string, by string) (any, error)
}

// decisionRequest is the body of the accept and reject routes; By is
// accepted_by or rejected_by.
type decisionRequest struct {
	Tools []struct {
		Name   string `json:"name"`
		SHA256 string `json:"sha256"`
	} `json:"tools"`
	AcceptedBy string `json:"accepted_by"`
	RejectedBy string `json:"rejected_by"`
}

func (h *Handler) reviewToolPins(w http.ResponseWriter, r *http.Request) {
	res, err := h.ReviewToolPins(r.Context(), r.PathValue("id"))
	h.answer(w, r, http.StatusOK, res, err)
}

// decideToolPins is the route of decide, h.AcceptToolPins or
// h.RejectToolPins.
func decideToolPins(h *Handler, decide func(context.Context, string, []byte, string) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := h.readBody(w, r)
		if err != nil {
			writeError(w, r, h.log, err)
			return
		}
		by, err := subject(r)
		if err != nil {
			writeError(w, r, h.log, err)
			return
		}
		res, err := decide(r.Context(), r.PathValue("id"), body, by)
		h.answer(w, r, http.StatusOK, res, err)
	}
}

// ReviewToolPins returns the pinned tool definitions of the mcp
// connection id and those waiting for review (Config.ToolPins).
func (h *Handler) ReviewToolPins(ctx context.Context, id string) (any, error) {
	if err := h.cfg.pinnable(id); err != nil {
		return nil, err
	}
	return h.cfg.ToolPins.Review(ctx, id)
}

// AcceptToolPins pins the waiting (or rejected) definitions body names
// ({"tools":[{"name","sha256"}],"accepted_by"?}) for the mcp connection
// id; accepted_by defaults to subject, then "operator". It needs the
// admin token, or the owner over pairing, as a change of where a secret
// is sent does.
func (h *Handler) AcceptToolPins(ctx context.Context, id string, body []byte, subject string) (any, error) {
	tools, by, err := toolDecision(ctx, &h.cfg, id, body, subject, true)
	if err != nil {
		return nil, err
	}
	res, err := h.cfg.ToolPins.Accept(ctx, id, tools, by)
	if err == nil {
		h.log.Info("admin: tool definitions accepted", "connection", id, "tools", len(tools), "request_id", apierror.RequestIDFrom(ctx))
	}
	return res, err
}

// RejectToolPins refuses the waiting definitions body names
// ({"tools":[{"name","sha256"}],"rejected_by"?}) for the mcp connection
// id, as AcceptToolPins pins them and with the same authority: the owner
// decides what agents are told.
func (h *Handler) RejectToolPins(ctx context.Context, id string, body []byte, subject string) (any, error) {
	tools, by, err := toolDecision(ctx, &h.cfg, id, body, subject, false)
	if err != nil {
		return nil, err
	}
	res, err := h.cfg.ToolPins.Reject(ctx, id, tools, by)
	if err == nil {
		h.log.Info("admin: tool definitions rejected", "connection", id, "tools", len(tools), "request_id", apierror.RequestIDFrom(ctx))
	}
	return res, err
}

// toolDecision reads an accept (or reject) body and checks who may make
// it; it returns the tools named (name → hash) and who decides.
func toolDecision(ctx context.Context, cfg *Config, id string, body []byte, subject string, accept bool) (map[string]string, string, error) {
	var req decisionRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, "", err
	}
	verb, by := "accept", req.AcceptedBy
	if !accept {
		verb, by = "reject", req.RejectedBy
		if req.AcceptedBy != "" {
			return nil, "", badRequest("a rejection names rejected_by").With("field", "accepted_by")
		}
	} else if req.RejectedBy != "" {
		return nil, "", badRequest("an acceptance names accepted_by").With("field", "rejected_by")
	}
	if len(req.Tools) == 0 {
		return nil, "", badRequest("tools must name at least one definition to "+verb).With("field", "tools")
	}
	tools := make(map[string]string, len(req.Tools))
	for _, t := range req.Tools {
		if t.Name == "" || t.SHA256 == "" {
			return nil, "", badRequest("each tool needs its name and the sha256 of the definition reviewed").With("field", "tools")
		}
		tools[t.Name] = t.SHA256
	}
	if err := cfg.pinnable(id); err != nil {
		return nil, "", err
	}
	if !maySendSecretsElsewhere(ctx) {
		// What agents are told and may call, as the owner approved it, is
		// not for any process on this host to change: an agent here could
		// otherwise accept its own server's rug pull.
		return nil, "", apierror.Coded(errcode.AdminTokenRequired, verb+"ing a tool definition changes what agents are told and may call, "+
			"which needs the admin token even from this host; send Authorization: Bearer <token> (gateway admin-token prints it)")
	}
	if by == "" {
		by = subject
	}
	if by == "" {
		by = "operator"
	}
	return tools, by, nil
}

// pinnable checks that id is an mcp connection whose pins this gateway
// keeps.
func (cfg *Config) pinnable(id string) error {
	c, err := cfg.Vault.Connection(id)
	if err != nil {
		return err
	}
	if c.Protocol != credvault.ProtocolMCP {
		return badRequest("tool pins belong to mcp connections").With("field", "protocol")
	}
	if cfg.ToolPins == nil {
		return apierror.Coded(errcode.DiscoveryUnavailable, "")
	}
	return nil
}
