package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/idnhq/idn/identity"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// signature is the per-request part of a signed request; every other
// header is the same for all requests of a target.
type signature struct{ sig, input string }

// httpTarget sends one kind of request, cycling through urls. When sigs is
// set, request i carries the i-th pre-signed signature (its own nonce) and
// the target holds exactly len(sigs) requests.
type httpTarget struct {
	client *http.Client
	method string
	urls   []string
	body   []byte
	header http.Header
	sigs   []signature
}

func (t *httpTarget) do(ctx context.Context, i int) error { return t.doInto(ctx, i, io.Discard) }

// doInto sends request i and copies a 200 answer's body to w.
func (t *httpTarget) doInto(ctx context.Context, i int, w io.Writer) error {
	var body io.Reader
	if t.body != nil {
		body = bytes.NewReader(t.body)
	}
	req, err := http.NewRequestWithContext(ctx, t.method, t.urls[i%len(t.urls)], body)
	if err != nil {
		return err
	}
	req.Header = t.header.Clone()
	if t.sigs != nil {
		req.Header["Signature"] = []string{t.sigs[i].sig}
		req.Header["Signature-Input"] = []string{t.sigs[i].input}
	}
	res, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		snippet, _ := io.ReadAll(io.LimitReader(res.Body, 300))
		return fmt.Errorf("status %d: %s", res.StatusCode, bytes.TrimSpace(snippet))
	}
	_, err = io.Copy(w, res.Body)
	return err
}

// presign signs n requests for t (the k-th for t.urls[k%len(urls)], each
// with a fresh nonce) on every CPU, before any timing starts, and stores the
// signatures in t.sigs. extra headers (such as a service API key) are set
// before signing and kept in t.header.
func presign(t *httpTarget, id *identity.Identity, n int, extra http.Header) error {
	t.sigs = make([]signature, n)
	sign := func(k int) (http.Header, error) {
		var body io.Reader
		if t.body != nil {
			body = bytes.NewReader(t.body)
		}
		req, err := http.NewRequest(t.method, t.urls[k%len(t.urls)], body)
		if err != nil {
			return nil, err
		}
		for name, v := range extra {
			req.Header[name] = v
		}
		if err := id.Sign(req, identity.SignOptions{}); err != nil {
			return nil, err
		}
		t.sigs[k] = signature{req.Header.Get("Signature"), req.Header.Get("Signature-Input")}
		return req.Header, nil
	}
	if n == 0 {
		return errors.New("presign: no requests")
	}
	h, err := sign(0)
	if err != nil {
		return err
	}
	h.Del("Signature")
	h.Del("Signature-Input")
	t.header = h

	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := 1 + w; k < n; k += workers {
				if _, err := sign(k); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// mcpDirect calls the echo tool over one go-sdk client session, the way an
// agent would without the gateway (or, on a session of the gateway's MCP
// endpoint, the way an MCP client uses the gateway).
type mcpDirect struct{ session *mcp.ClientSession }

func (m mcpDirect) do(ctx context.Context, _ int) error {
	res, err := m.session.CallTool(ctx, &mcp.CallToolParams{Name: echoTool, Arguments: echoArgs{Text: "hello"}})
	if err != nil {
		return err
	}
	if res.IsError {
		return errors.New("tool call answered is_error")
	}
	return nil
}

// newClient returns an HTTP client for one target, with enough idle
// connections that the load generator never dials in steady state.
func newClient() *http.Client {
	return &http.Client{
		Timeout: requestGrace,
		Transport: &http.Transport{
			MaxIdleConns: maxWorkers, MaxIdleConnsPerHost: maxWorkers, IdleConnTimeout: 30 * time.Second,
			DisableCompression: true,
		},
	}
}
