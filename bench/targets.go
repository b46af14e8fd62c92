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
// header is the same for all requests of a target. digest is set when the
// target's bodies differ.
type signature struct{ sig, input, digest string }

// httpTarget sends one kind of request, cycling through urls. When sigs is
// set, request i carries the i-th pre-signed signature (its own nonce) and
// the target holds exactly len(sigs) requests.
type httpTarget struct {
	client *http.Client
	method string
	urls   []string
	body   []byte
	// bodies, when set, gives request i its own body instead (a JSON-RPC
	// request with its own id, say).
	bodies func(i int) []byte
	header http.Header
	sigs   []signature
}

// bodyOf returns the body of request i, or nil.
func (t *httpTarget) bodyOf(i int) io.Reader {
	switch {
	case t.bodies != nil:
		return bytes.NewReader(t.bodies(i))
	case t.body != nil:
		return bytes.NewReader(t.body)
	}
	return nil
}

func (t *httpTarget) do(ctx context.Context, i int) error { return t.doInto(ctx, i, io.Discard) }

// doInto sends request i and copies a 200 answer's body to w.
func (t *httpTarget) doInto(ctx context.Context, i int, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, t.method, t.urls[i%len(t.urls)], t.bodyOf(i))
	if err != nil {
		return err
	}
	req.Header = t.header.Clone()
	if t.sigs != nil {
		req.Header["Signature"] = []string{t.sigs[i].sig}
		req.Header["Signature-Input"] = []string{t.sigs[i].input}
		if t.sigs[i].digest != "" {
			req.Header["Content-Digest"] = []string{t.sigs[i].digest}
		}
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
		req, err := http.NewRequest(t.method, t.urls[k%len(t.urls)], t.bodyOf(k))
		if err != nil {
			return nil, err
		}
		for name, v := range extra {
			req.Header[name] = v
		}
		if err := id.Sign(req, identity.SignOptions{}); err != nil {
			return nil, err
		}
		t.sigs[k] = signature{sig: req.Header.Get("Signature"), input: req.Header.Get("Signature-Input")}
		if t.bodies != nil {
			t.sigs[k].digest = req.Header.Get("Content-Digest")
		}
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
