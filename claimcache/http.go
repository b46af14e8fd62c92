package claimcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Feed paging limits: the control plane answers at most 2,000 claims a page.
const (
	DefaultPageSize = 2000
	maxPageSize     = 2000
	// maxPageBytes bounds one feed page; 2,000 claims need well under 2 MiB.
	maxPageBytes = 16 << 20
	// maxErrorBytes bounds the error envelope read from a failed answer.
	maxErrorBytes = 64 << 10
)

// HTTPSource reads the control plane's approved-claims feed:
// GET {BaseURL}/v1/namespaces/claims?service=<slug>&limit=<n>&offset=<n>,
// following pagination to the end, with "Authorization: Bearer <key>".
//
// Versions are ETags. The first page is requested with If-None-Match set to
// the ETag of the last complete read, and a 304 answer means the whole set is
// unchanged, so the control plane's ETag must identify the service's entire
// approved set (every page), not one page. A read whose pages disagree on
// pagination.total fails with ErrFeedChanged.
type HTTPSource struct {
	// BaseURL is the control plane's base address ({IDN_REGISTRY_URL}).
	// Required.
	BaseURL string
	// Client sends the requests; the gateway passes one whose transport adds
	// its signed headers. Nil means http.DefaultClient. Redirects are
	// never followed, whatever its CheckRedirect says: a 3xx is a
	// StatusError, so the key and the signature reach BaseURL only.
	Client *http.Client
	// APIKey returns the service API key to present for service. Required;
	// the key is never written into errors.
	APIKey func(service string) (string, error)
	// PageSize is the limit asked per page, 1 to 2000. Zero means
	// DefaultPageSize.
	PageSize int
}

var _ Source = (*HTTPSource)(nil)

// ApprovedClaims implements Source.
func (h *HTTPSource) ApprovedClaims(ctx context.Context, service, version string, add func(Claim) error) (string, error) {
	return h.approvedClaims(ctx, service, version, add, nil)
}

// approvedClaims is ApprovedClaims, and tells reserve (when not nil) the
// total the first page announces.
func (h *HTTPSource) approvedClaims(ctx context.Context, service, version string, add func(Claim) error, reserve func(int)) (string, error) {
	if h.BaseURL == "" || h.APIKey == nil {
		return "", errors.New("claimcache: HTTPSource needs BaseURL and APIKey")
	}
	limit := h.PageSize
	if limit == 0 {
		limit = DefaultPageSize
	}
	if limit < 1 || limit > maxPageSize {
		return "", fmt.Errorf("claimcache: PageSize %d outside 1-%d", h.PageSize, maxPageSize)
	}
	key, err := h.APIKey(service)
	if err != nil {
		return "", fmt.Errorf("claimcache: API key for service %q: %w", service, err)
	}
	endpoint, err := url.JoinPath(h.BaseURL, "v1/namespaces/claims")
	if err != nil {
		return "", fmt.Errorf("claimcache: BaseURL: %w", err)
	}
	var addErr error // add's, told apart from the page's
	claim := func(c Claim) error {
		addErr = add(c)
		return addErr
	}
	etag, total := "", -1
	for offset := 0; ; {
		p, tag, err := h.page(ctx, endpoint, key, service, limit, offset, version, claim)
		if addErr != nil {
			return "", fmt.Errorf("claimcache: feed of service %q: %w", service, addErr)
		}
		if err != nil {
			return "", err
		}
		if offset == 0 {
			etag, total, version = tag, p.total, ""
			if reserve != nil {
				reserve(total)
			}
		} else if p.total != total {
			return "", fmt.Errorf("claimcache: total went from %d to %d: %w", total, p.total, ErrFeedChanged)
		}
		offset += p.claims
		if !p.hasMore {
			return etag, nil
		}
		if p.claims == 0 {
			return "", fmt.Errorf("claimcache: feed page at offset %d is empty but has_more is true", offset)
		}
	}
}

// page fetches one page and hands its claims to claim as they are decoded.
// ifNoneMatch is only non-empty for the first page.
func (h *HTTPSource) page(ctx context.Context, endpoint, key, service string, limit, offset int, ifNoneMatch string, claim func(Claim) error) (feedPage, string, error) {
	q := url.Values{"service": {service}, "limit": {strconv.Itoa(limit)}, "offset": {strconv.Itoa(offset)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"?"+q.Encode(), nil)
	if err != nil {
		return feedPage{}, "", fmt.Errorf("claimcache: feed request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "application/json")
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	resp, err := noRedirects(h.Client).Do(req)
	if err != nil {
		return feedPage{}, "", fmt.Errorf("claimcache: feed: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && ifNoneMatch != "":
		return feedPage{}, "", ErrNotModified
	case resp.StatusCode != http.StatusOK:
		return feedPage{}, "", statusError("feed", resp)
	}
	p, err := decodeFeedPage(io.LimitReader(resp.Body, maxPageBytes), claim)
	if err != nil {
		return feedPage{}, "", fmt.Errorf("claimcache: feed page at offset %d: %w", offset, err)
	}
	return p, resp.Header.Get("ETag"), nil
}

// feedPage is what a validated page of the feed said besides its claims.
type feedPage struct {
	claims  int // how many it had
	total   int
	hasMore bool
}

// decodeFeedPage parses {"claims":[…],"pagination":{"limit","offset","total","has_more"}}
// as it reads it, handing each claim to claim as soon as it is decoded, so a
// page is never held whole. Both members are required, "claims" once;
// unknown members are ignored, and keys match as encoding/json matches
// them (exactly or under case folding). An error of claim ends the decoding and is
// returned as it is. A page that turns out malformed after some of its
// claims were handed on fails all the same, and its delivery with it.
func decodeFeedPage(r io.Reader, claim func(Claim) error) (feedPage, error) {
	var pg struct {
		seen                 bool
		limit, offset, total *int
		hasMore              *bool
	}
	claims := -1 // not seen yet
	p := &pageReader{r: r, buf: make([]byte, 0, 32<<10)}
	var text []byte
	malformed := func(err error) (feedPage, error) { return feedPage{}, fmt.Errorf("malformed JSON: %w", err) }
	if !p.consume('{') {
		return malformed(p.fail())
	}
	err := p.members(func(key []byte) error {
		switch {
		case keyIs(key, "claims"):
			if claims >= 0 {
				return errors.New(`"claims" appears twice`)
			}
			if p.literal("null") {
				return nil // missing
			}
			if !p.consume('[') {
				return errors.New(`"claims" is not an array`)
			}
			claims = 0
			return p.elements(func() error {
				var c Claim
				var err error
				if c, text, err = p.claim(text); err != nil {
					return err
				}
				claims++
				if err := claim(c); err != nil {
					return &claimError{err}
				}
				return nil
			})
		case keyIs(key, "pagination"):
			pg.seen = false
			if p.literal("null") {
				return nil
			}
			if !p.consume('{') {
				return errors.New(`"pagination" is not an object`)
			}
			pg.seen, pg.limit, pg.offset, pg.total, pg.hasMore = true, nil, nil, nil, nil
			return p.members(func(key []byte) error {
				switch {
				case keyIs(key, "limit"):
					return p.integer(&pg.limit)
				case keyIs(key, "offset"):
					return p.integer(&pg.offset)
				case keyIs(key, "total"):
					return p.integer(&pg.total)
				case keyIs(key, "has_more"):
					return p.boolean(&pg.hasMore)
				}
				return p.skip(0)
			})
		}
		return p.skip(0)
	})
	var ce *claimError
	switch {
	case errors.As(err, &ce):
		return feedPage{}, ce.err
	case err != nil:
		return malformed(err)
	}
	if p.peek(); p.pos < len(p.buf) {
		return feedPage{}, errors.New("trailing data after the JSON object")
	}
	if p.err != io.EOF {
		return malformed(p.err)
	}
	switch {
	case claims < 0:
		return feedPage{}, errors.New(`missing "claims"`)
	case !pg.seen || pg.limit == nil || pg.offset == nil || pg.total == nil || pg.hasMore == nil:
		return feedPage{}, errors.New(`"pagination" needs limit, offset, total and has_more`)
	case *pg.limit < 0 || *pg.offset < 0 || *pg.total < 0:
		return feedPage{}, errors.New("negative pagination value")
	case claims > *pg.limit:
		return feedPage{}, fmt.Errorf("%d claims on a page of limit %d", claims, *pg.limit)
	}
	return feedPage{claims: claims, total: *pg.total, hasMore: *pg.hasMore}, nil
}

// claimError carries the error of decodeFeedPage's claim out of the
// reader, apart from the page's own errors.
type claimError struct{ err error }

func (e *claimError) Error() string { return e.err.Error() }

// noRedirects returns a copy of c (nil: http.DefaultClient) that hands a
// 3xx back instead of following it: the requests carry an API key and,
// from the gateway, its signature, which belong to the control plane only.
func noRedirects(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &nc
}

// statusError builds a StatusError from an unexpected answer, keeping only
// the envelope's code (a short token) from the body.
func statusError(op string, resp *http.Response) error {
	var env struct {
		Code string `json:"code"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, maxErrorBytes)).Decode(&env)
	if len(env.Code) > 64 || strings.ContainsFunc(env.Code, func(r rune) bool {
		return !(r == '_' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		env.Code = ""
	}
	return &StatusError{Op: op, StatusCode: resp.StatusCode, Code: env.Code}
}
