package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// HTTPDesk files requests with the control plane and reads its decisions:
// POST {BaseURL}/v1/gateways/actions and GET
// {BaseURL}/v1/gateways/actions/{id}, as a paired gateway.
type HTTPDesk struct {
	// BaseURL is the control plane's address. Required.
	BaseURL string
	// Client signs each request with the gateway's identity and follows
	// no redirect. Required.
	Client *http.Client
}

var _ Desk = (*HTTPDesk)(nil)

type filing struct {
	ID         string          `json:"id"`
	Gateway    string          `json:"gateway"`
	Connection string          `json:"connection_id"`
	Service    string          `json:"service"`
	Namespace  string          `json:"agent_namespace"`
	PublicKey  string          `json:"agent_public_key"`
	AgentName  string          `json:"agent_name,omitempty"`
	Subject    string          `json:"subject,omitempty"`
	Target     string          `json:"target"`
	Document   json.RawMessage `json:"document"`
	Digest     string          `json:"digest"`
	ExpiresAt  time.Time       `json:"expires_at"`
}

// File posts r.
func (d *HTTPDesk) File(ctx context.Context, r Request) error {
	body, err := json.Marshal(filing{ID: r.ID, Gateway: r.Gateway, Connection: r.Connection, Service: r.Service, Namespace: r.Namespace,
		PublicKey: r.PublicKey, AgentName: r.AgentName, Subject: r.Subject, Target: r.Target, Document: r.Document, Digest: r.Digest,
		ExpiresAt: r.ExpiresAt.UTC()})
	if err != nil {
		return err
	}
	_, err = d.do(ctx, http.MethodPost, "v1/gateways/actions", body, http.StatusCreated)
	return err
}

// Status reads the decision on request id.
func (d *HTTPDesk) Status(ctx context.Context, id string) (Status, error) {
	b, err := d.do(ctx, http.MethodGet, "v1/gateways/actions/"+url.PathEscape(id), nil, http.StatusOK)
	if err != nil {
		return Status{}, err
	}
	var dec struct {
		Status    string     `json:"status"`
		Uses      int        `json:"uses"`
		Until     string     `json:"until"`
		Assertion *Assertion `json:"assertion"`
	}
	if err := json.Unmarshal(b, &dec); err != nil {
		return Status{}, fmt.Errorf("approval: decision: %w", err)
	}
	st := Status{State: dec.Status, Uses: dec.Uses, Assertion: dec.Assertion}
	if dec.Until != "" {
		if st.Until, err = time.Parse(time.RFC3339, dec.Until); err != nil {
			return Status{}, fmt.Errorf("approval: decision: until: %w", err)
		}
	}
	return st, nil
}

// maxAnswer bounds what the control plane's answer may take in memory.
const maxAnswer = 64 << 10

func (d *HTTPDesk) do(ctx context.Context, method, path string, body []byte, want int) ([]byte, error) {
	u, err := url.JoinPath(d.BaseURL, path)
	if err != nil {
		return nil, err
	}
	var rb io.Reader
	if body != nil {
		rb = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rb)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("approval: control plane: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("approval: control plane: %w", err)
	}
	if resp.StatusCode != want {
		var env struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(b, &env)
		return nil, fmt.Errorf("approval: control plane answered %d %s", resp.StatusCode, env.Code)
	}
	return b, nil
}
