package credvault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// TestRequest describes an upstream probe (admin "test"). Zero fields mean
// GET /, no extra headers, no body.
type TestRequest struct {
	Method string      // HTTP method; empty means GET
	Path   string      // path and optional query, relative to base_url + path_prefix; empty means "/"
	Header http.Header // extra headers; the credential header always wins
	Body   []byte
}

// DefaultTestTimeout bounds a probe when its context has no deadline.
const DefaultTestTimeout = 15 * time.Second

// maxProbeDrain is how much of a probe's response body is read (and
// discarded) so the connection can be reused.
const maxProbeDrain = 64 << 10

// Test probes a connection's upstream with its injected credential through
// base (nil means http.DefaultTransport), records the outcome as the
// connection's last_test and returns it. Redirects are not followed. ok is
// true for a status below 400. The upstream's response body is discarded
// (it could echo the credential). A failed probe is a result, not an error:
// the error return is for an unknown connection (ErrNotFound), a bad
// request (*ValidationError) or a failed store write.
func (v *Vault) Test(ctx context.Context, id string, tr TestRequest, base http.RoundTripper) (TestResult, error) {
	r, ok := v.Lookup(id)
	if !ok {
		return TestResult{}, ErrNotFound
	}
	req, err := newProbeRequest(ctx, r.Connection, tr)
	if err != nil {
		return TestResult{}, err
	}
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTestTimeout)
		defer cancel()
		req = req.WithContext(ctx)
	}
	client := &http.Client{
		Transport:     v.Transport(id, base),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	start := v.clock()
	resp, err := client.Do(req)
	res := TestResult{TestedAt: v.now()}
	res.LatencyMS = v.clock().Sub(start).Milliseconds()
	if err != nil {
		res.Error = probeError(err)
	} else {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeDrain))
		_ = resp.Body.Close()
		res.Status = resp.StatusCode
		res.OK = resp.StatusCode < 400
		if !res.OK {
			res.Error = fmt.Sprintf("upstream answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		}
	}
	// Record even when the caller has gone: the probe did happen.
	if err := v.RecordTest(context.WithoutCancel(ctx), id, res); err != nil {
		return res, err
	}
	return res, nil
}

func newProbeRequest(ctx context.Context, c *Connection, tr TestRequest) (*http.Request, error) {
	method := tr.Method
	if method == "" {
		method = http.MethodGet
	}
	if !headerNamePattern.MatchString(method) || len(method) > 16 {
		return nil, invalid("method", "must be an HTTP method token")
	}
	p := tr.Path
	if p == "" {
		p = "/"
	}
	pathPart, query, _ := strings.Cut(p, "?")
	if !strings.HasPrefix(pathPart, "/") || strings.HasPrefix(pathPart, "//") || len(p) > maxURLLen ||
		strings.ContainsAny(p, "#\\ ") || hasControl(p) || hasDotSegment(pathPart) {
		return nil, invalid("path", "must be an absolute path (optionally with a query) without '#', '\\', spaces or dot segments")
	}
	u, err := c.UpstreamBase()
	if err != nil {
		return nil, err
	}
	if pathPart != "/" {
		u = u.JoinPath(pathPart)
	}
	switch {
	case u.RawQuery == "":
		u.RawQuery = query
	case query != "":
		u.RawQuery += "&" + query
	}
	var body io.Reader
	if tr.Body != nil {
		body = bytes.NewReader(tr.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, invalid("path", "does not form a valid upstream URL")
	}
	for name, vals := range tr.Header {
		if !headerNamePattern.MatchString(name) {
			return nil, invalid("headers", "names must be HTTP header names")
		}
		for _, val := range vals {
			if hasControl(val) {
				return nil, invalid("headers", "values must not contain control characters")
			}
			req.Header.Add(name, val)
		}
	}
	return req, nil
}

// probeError describes a failed probe without URLs (the client's url.Error
// would repeat the request URL).
func probeError(err error) string {
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return "upstream timed out"
	}
	switch {
	case errors.Is(err, ErrCredentialUnresolved):
		return "credential unresolved: " + unwrapURLError(err).Error()
	case errors.Is(err, ErrCredentialDestination):
		return "credential withheld: request not bound for the connection's upstream"
	}
	return "upstream unreachable: " + unwrapURLError(err).Error()
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
