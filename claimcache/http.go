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
	"time"

	"github.com/idnhq/idn/claimcache/feedwire"
	"github.com/idnhq/idn/errcode"
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
// GET {BaseURL}/v1/namespaces/claims?service=<slug>&limit=<n>, following
// pagination to the end, with "Authorization: Bearer <key>". Each page
// after the first starts after the last claim of the one before
// (&after=<claim_id>), so a read never skips a claim however the feed
// changes meanwhile.
//
// It is a WaitingSource. The version of a full read is the cursor its first
// page carries, and ClaimChanges asks for the changes after it
// (?since=<cursor>, following "more"). A 410 answer means the control plane
// pruned them: ErrVersionExpired. WaitClaimChanges asks the control plane
// to hold the request until a change comes (&wait=<seconds>); one that
// does not know the parameter answers at once. ApprovedClaims given a
// cursor first asks whether any change follows it, and answers
// ErrNotModified when none does.
//
// An older control plane, whose pages carry no cursor, is paged by offset.
// A read whose pages disagree on pagination.total then fails with
// ErrFeedChanged. Such a feed is versioned by ETag: the first page is
// requested with If-None-Match set to the ETag of the last complete read.
// A 304 answer means the whole set is unchanged, so that ETag must identify
// the service's entire approved set (every page), not one page.
// ClaimChanges answers ErrVersionExpired for such a version.
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
	// the key is never written into errors. An empty key with a nil error
	// sends no Authorization header: the request stands on the client's
	// signature alone, as a gateway paired with the service's owner may.
	APIKey func(service string) (string, error)
	// PageSize is the limit asked per page, 1 to 2000. Zero means
	// DefaultPageSize.
	PageSize int
}

var _ WaitingSource = (*HTTPSource)(nil)

// maxChangePages bounds the pages of changes one ClaimChanges reads; it
// returns the version reached, and the next call continues from there.
const maxChangePages = 50

// ApprovedClaims implements Source.
func (h *HTTPSource) ApprovedClaims(ctx context.Context, service, version string, add func(Claim) error) (string, error) {
	return h.approvedClaims(ctx, service, version, add, nil)
}

// approvedClaims is ApprovedClaims, and tells reserve (when not nil) the
// total the first page announces.
func (h *HTTPSource) approvedClaims(ctx context.Context, service, version string, add func(Claim) error, reserve func(int)) (string, error) {
	limit, key, endpoint, err := h.setup(service)
	if err != nil {
		return "", err
	}
	if since, err := feedwire.ParseCursor(version); err == nil {
		// A cursor: the set is unchanged when no change follows it.
		p, err := h.changes(ctx, endpoint, key, service, 1, since, 0)
		if err == nil && len(p.changes) == 0 {
			return "", ErrNotModified
		}
		if err != nil && !errors.Is(err, ErrVersionExpired) {
			return "", err
		}
		version = ""
	}
	var addErr error // add's, told apart from the page's
	var last string  // the id of the last claim read
	claim := func(c Claim) error {
		last = c.ID
		addErr = add(c)
		return addErr
	}
	etag, total, after, byCursor := "", -1, "", false
	for offset := 0; ; {
		p, tag, err := h.page(ctx, endpoint, key, service, limit, offset, after, version, claim)
		if addErr != nil {
			return "", fmt.Errorf("claimcache: feed of service %q: %w", service, addErr)
		}
		if err != nil {
			return "", err
		}
		switch {
		case offset == 0:
			etag, total, version, byCursor = tag, p.total, "", p.cursor != ""
			if byCursor {
				etag = p.cursor
			}
			if reserve != nil {
				reserve(total)
			}
		case p.total != total && !byCursor:
			return "", fmt.Errorf("claimcache: total went from %d to %d: %w", total, p.total, ErrFeedChanged)
		}
		offset += p.claims
		if !p.hasMore {
			return etag, nil
		}
		if p.claims == 0 {
			return "", fmt.Errorf("claimcache: feed page at offset %d is empty but has_more is true", offset)
		}
		if byCursor {
			// Page on from the last claim read: nothing is skipped however the
			// feed changes meanwhile, and the changes after the first page's
			// cursor replay what did.
			after = last
		}
	}
}

// setup checks the configuration and returns the page size, the key and
// the feed's URL.
func (h *HTTPSource) setup(service string) (limit int, key, endpoint string, err error) {
	if h.BaseURL == "" || h.APIKey == nil {
		return 0, "", "", errors.New("claimcache: HTTPSource needs BaseURL and APIKey")
	}
	limit = h.PageSize
	if limit == 0 {
		limit = DefaultPageSize
	}
	if limit < 1 || limit > maxPageSize {
		return 0, "", "", fmt.Errorf("claimcache: PageSize %d outside 1-%d", h.PageSize, maxPageSize)
	}
	if key, err = h.APIKey(service); err != nil {
		return 0, "", "", fmt.Errorf("claimcache: API key for service %q: %w", service, err)
	}
	if endpoint, err = url.JoinPath(h.BaseURL, "v1/namespaces/claims"); err != nil {
		return 0, "", "", fmt.Errorf("claimcache: BaseURL: %w", err)
	}
	return limit, key, endpoint, nil
}

// ClaimChanges implements ChangeSource.
func (h *HTTPSource) ClaimChanges(ctx context.Context, service, version string, apply func(Change) error) (string, error) {
	return h.claimChanges(ctx, service, version, 0, apply)
}

// MaxWait is the longest wait WaitClaimChanges asks the control plane for
// (it holds a request for at most 30 s).
const MaxWait = 30 * time.Second

// WaitClaimChanges implements WaitingSource: the first request for changes
// carries &wait=<seconds> and the control plane holds it until a change
// commits. The wait is cut to whole seconds, to MaxWait, and to three
// quarters of Client.Timeout. So the client does not give up on a request
// the control plane still holds. Under a second, the request is not held.
func (h *HTTPSource) WaitClaimChanges(ctx context.Context, service, version string, wait time.Duration, apply func(Change) error) (string, error) {
	wait = min(wait, MaxWait)
	if h.Client != nil && h.Client.Timeout > 0 {
		wait = min(wait, h.Client.Timeout*3/4)
	}
	return h.claimChanges(ctx, service, version, int(wait/time.Second), apply)
}

// claimChanges reads the changes after version, the first page held up to
// wait seconds.
func (h *HTTPSource) claimChanges(ctx context.Context, service, version string, wait int, apply func(Change) error) (string, error) {
	since, err := feedwire.ParseCursor(version)
	if err != nil {
		return "", fmt.Errorf("claimcache: version %q is not a feed cursor: %w", version, ErrVersionExpired)
	}
	limit, key, endpoint, err := h.setup(service)
	if err != nil {
		return "", err
	}
	for range maxChangePages {
		p, err := h.changes(ctx, endpoint, key, service, limit, since, wait)
		wait = 0
		if err != nil {
			return "", err
		}
		for _, ch := range p.changes {
			if err := apply(ch); err != nil {
				return "", fmt.Errorf("claimcache: changes of service %q: %w", service, err)
			}
		}
		since = p.cursor
		if !p.more {
			break
		}
	}
	return feedwire.FormatCursor(since), nil
}

// changes fetches one page of changes after since, held up to wait
// seconds when none follows it yet.
func (h *HTTPSource) changes(ctx context.Context, endpoint, key, service string, limit int, since int64, wait int) (changePage, error) {
	q := url.Values{"service": {service}, "limit": {strconv.Itoa(limit)}, feedwire.SinceQuery: {feedwire.FormatCursor(since)}}
	if wait > 0 {
		q.Set(feedwire.WaitQuery, strconv.Itoa(wait))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"?"+q.Encode(), nil)
	if err != nil {
		return changePage{}, fmt.Errorf("claimcache: feed request: %w", err)
	}
	setAPIKey(req.Header, key)
	req.Header.Set("Accept", "application/json")
	resp, err := noRedirects(h.Client).Do(req)
	if err != nil {
		return changePage{}, fmt.Errorf("claimcache: feed: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusGone:
		return changePage{}, fmt.Errorf("%w: %w", statusError("feed", resp), ErrVersionExpired)
	case resp.StatusCode != http.StatusOK:
		return changePage{}, statusError("feed", resp)
	}
	p, err := decodeChanges(io.LimitReader(resp.Body, maxPageBytes), since, limit)
	if err != nil {
		return changePage{}, fmt.Errorf("claimcache: feed changes after %d: %w", since, err)
	}
	return p, nil
}

// changePage is a validated page of changes.
type changePage struct {
	changes []Change
	cursor  int64
	more    bool
}

// decodeChanges parses a feedwire.Changes answer to a request for the
// changes after since: every member is required, every op known, and the
// cursor moves forward with the changes (and only with them).
func decodeChanges(r io.Reader, since int64, limit int) (changePage, error) {
	var wire struct {
		Changes *[]feedwire.Change `json:"changes"`
		Cursor  *string            `json:"cursor"`
		More    *bool              `json:"more"`
	}
	dec := json.NewDecoder(r)
	if err := dec.Decode(&wire); err != nil {
		return changePage{}, fmt.Errorf("malformed JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return changePage{}, errors.New("trailing data after the JSON object")
	}
	if wire.Changes == nil || wire.Cursor == nil || wire.More == nil {
		return changePage{}, errors.New(`missing "changes", "cursor" or "more"`)
	}
	cursor, err := feedwire.ParseCursor(*wire.Cursor)
	switch {
	case err != nil:
		return changePage{}, err
	case len(*wire.Changes) > limit:
		return changePage{}, fmt.Errorf("%d changes on a page of limit %d", len(*wire.Changes), limit)
	case len(*wire.Changes) == 0 && (cursor != since || *wire.More):
		return changePage{}, errors.New("the cursor moved, or more follow, without a change")
	case len(*wire.Changes) > 0 && cursor <= since:
		return changePage{}, errors.New("the cursor did not move past the changes")
	}
	p := changePage{changes: make([]Change, len(*wire.Changes)), cursor: cursor, more: *wire.More}
	for i, w := range *wire.Changes {
		if w.Op != feedwire.OpUpsert && w.Op != feedwire.OpDelete {
			return changePage{}, fmt.Errorf("change %d has op %q", i, w.Op)
		}
		p.changes[i] = Change{Delete: w.Op == feedwire.OpDelete, Rejected: w.Op == feedwire.OpDelete && w.Status == feedwire.StatusRejected, Claim: Claim{ID: w.ClaimID, Namespace: w.Namespace, PublicKey: w.PublicKey,
			Service: w.Service, ApprovedAt: w.ApprovedAt, Subject: w.Subject, AgentID: w.AgentID, AgentName: w.AgentName}}
	}
	return p, nil
}

// page fetches one page and hands its claims to claim as they are decoded.
// ifNoneMatch is only non-empty for the first page.
func (h *HTTPSource) page(ctx context.Context, endpoint, key, service string, limit, offset int, after, ifNoneMatch string, claim func(Claim) error) (feedPage, string, error) {
	q := url.Values{"service": {service}, "limit": {strconv.Itoa(limit)}, "offset": {strconv.Itoa(offset)}}
	if after != "" {
		q = url.Values{"service": {service}, "limit": {strconv.Itoa(limit)}, feedwire.AfterQuery: {after}}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"?"+q.Encode(), nil)
	if err != nil {
		return feedPage{}, "", fmt.Errorf("claimcache: feed request: %w", err)
	}
	setAPIKey(req.Header, key)
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
	cursor  string // "" from a control plane without change cursors
}

// decodeFeedPage parses {"claims":[…],"pagination":{"limit","offset","total","has_more"},"cursor"}
// as it reads it, handing each claim to claim as soon as it is decoded, so a
// page is never held whole. The first two members are required, "claims"
// once; "cursor", when present, must be a feed cursor;
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
	var cursor string
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
		case keyIs(key, "cursor"):
			if p.literal("null") {
				cursor = ""
				return nil
			}
			var err error
			if p.str, err = p.appendString(p.str[:0]); err != nil {
				return fmt.Errorf("cursor: %w", err)
			}
			cursor = string(p.str)
			return nil
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
	if cursor != "" {
		if _, err := feedwire.ParseCursor(cursor); err != nil {
			return feedPage{}, err
		}
	}
	return feedPage{claims: claims, total: *pg.total, hasMore: *pg.hasMore, cursor: cursor}, nil
}

// claimError carries the error of decodeFeedPage's claim out of the
// reader, apart from the page's own errors.
type claimError struct{ err error }

func (e *claimError) Error() string { return e.err.Error() }

// setAPIKey presents key as a bearer token; an empty key presents none.
func setAPIKey(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

// noRedirects returns a copy of c (nil: http.DefaultClient) that hands a
// 3xx back instead of following it. The requests carry an API key and,
// from the gateway, its signature; both belong to the control plane only.
func noRedirects(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &nc
}

// statusError builds a StatusError from an unexpected answer. Of the body
// it keeps only the envelope's code, and only a code of package errcode.
// A former name the control plane answered becomes the current one.
func statusError(op string, resp *http.Response) error {
	var env struct {
		Code string `json:"code"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, maxErrorBytes)).Decode(&env)
	se := &StatusError{Op: op, StatusCode: resp.StatusCode}
	if code, ok := errcode.Parse(env.Code); ok {
		se.Code = code.String()
	}
	return se
}
