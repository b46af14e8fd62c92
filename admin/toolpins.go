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
}

type acceptRequest struct {
	Tools []struct {
		Name   string `json:"name"`
		SHA256 string `json:"sha256"`
	} `json:"tools"`
	AcceptedBy string `json:"accepted_by"`
}

func (h *Handler) reviewToolPins(w http.ResponseWriter, r *http.Request) {
	res, err := h.ReviewToolPins(r.Context(), r.PathValue("id"))
	h.answer(w, r, http.StatusOK, res, err)
}

func (h *Handler) acceptToolPins(w http.ResponseWriter, r *http.Request) {
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
	res, err := h.AcceptToolPins(r.Context(), r.PathValue("id"), body, by)
	h.answer(w, r, http.StatusOK, res, err)
}

// ReviewToolPins returns the pinned tool definitions of the mcp
// connection id and those waiting for review (Config.ToolPins).
func (h *Handler) ReviewToolPins(ctx context.Context, id string) (any, error) {
	if err := h.cfg.pinnable(id); err != nil {
		return nil, err
	}
	return h.cfg.ToolPins.Review(ctx, id)
}

// AcceptToolPins pins the waiting definitions body names
// ({"tools":[{"name","sha256"}],"accepted_by"?}) for the mcp connection
// id; accepted_by defaults to subject, then "operator". It needs the
// admin token, or the owner over pairing, as a change of where a secret
// is sent does.
func (h *Handler) AcceptToolPins(ctx context.Context, id string, body []byte, subject string) (any, error) {
	var req acceptRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if len(req.Tools) == 0 {
		return nil, badRequest("tools must name at least one definition to accept").With("field", "tools")
	}
	tools := make(map[string]string, len(req.Tools))
	for _, t := range req.Tools {
		if t.Name == "" || t.SHA256 == "" {
			return nil, badRequest("each tool needs its name and the sha256 of the definition reviewed").With("field", "tools")
		}
		tools[t.Name] = t.SHA256
	}
	if err := h.cfg.pinnable(id); err != nil {
		return nil, err
	}
	if !maySendSecretsElsewhere(ctx) {
		// What agents are told and may call, as the owner approved it, is
		// not for any process on this host to change: an agent here could
		// otherwise accept its own server's rug pull.
		return nil, apierror.Coded(errcode.AdminTokenRequired, "accepting a tool definition changes what agents are told and may call, "+
			"which needs the admin token even from this host; send Authorization: Bearer <token> (gateway admin-token prints it)")
	}
	by := req.AcceptedBy
	if by == "" {
		by = subject
	}
	if by == "" {
		by = "operator"
	}
	res, err := h.cfg.ToolPins.Accept(ctx, id, tools, by)
	if err == nil {
		h.log.Info("admin: tool definitions accepted", "connection", id, "tools", len(tools), "request_id", apierror.RequestIDFrom(ctx))
	}
	return res, err
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
