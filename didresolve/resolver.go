package didresolve

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// maxResultBytes caps a resolution answer read from the network.
const maxResultBytes = 1 << 20

// Resolver resolves did:idn DIDs against a control plane's
// /1.0/identifiers/{did} endpoint and caches the answers. It checks every
// document it receives (id, key types, keyIds matching keys) before
// trusting it. A Resolver is safe for concurrent use and must not be copied
// after first use.
type Resolver struct {
	// BaseURL is the control plane, e.g. "https://registry.example".
	// Required.
	BaseURL string
	// Client sends the requests; nil means a client with a 10 s timeout.
	Client *http.Client
	// TTL is how long an answer is reused; zero means 5 minutes, negative
	// disables caching.
	TTL time.Duration
	// MaxEntries bounds the cache (least recently used entries go first);
	// zero means 1024.
	MaxEntries int
	// Clock returns the current time; nil means time.Now.
	Clock func() time.Time

	once   sync.Once
	client *http.Client
	mu     sync.Mutex
	lru    *list.List // of *cacheEntry, most recent first
	byDID  map[string]*list.Element
}

type cacheEntry struct {
	did     string
	result  *Result
	expires time.Time
}

func (r *Resolver) init() {
	r.once.Do(func() {
		r.client = r.Client
		if r.client == nil {
			r.client = &http.Client{Timeout: 10 * time.Second}
		}
		r.lru = list.New()
		r.byDID = make(map[string]*list.Element)
	})
}

func (r *Resolver) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}

func (r *Resolver) ttl() time.Duration {
	if r.TTL == 0 {
		return 5 * time.Minute
	}
	return r.TTL
}

// Resolve returns the resolution result of did ("did:idn:<namespace>"; a
// DID URL's fragment is ignored, so "did:idn:acme#ed25519-…" resolves
// did:idn:acme). A deactivated DID resolves without error and with
// DocumentMetadata.Deactivated set. An unknown namespace gives ErrNotFound,
// a malformed DID ErrInvalidDID. The returned Result is shared with the
// cache and must not be modified.
func (r *Resolver) Resolve(ctx context.Context, did string) (*Result, error) {
	r.init()
	did, _, _ = strings.Cut(did, "#")
	ns, err := ParseDID(did)
	if err != nil {
		return nil, err
	}
	if res := r.cached(did); res != nil {
		return res, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		strings.TrimSuffix(r.BaseURL, "/")+"/1.0/identifiers/"+url.PathEscape(did), nil)
	if err != nil {
		return nil, fmt.Errorf("didresolve: %w", err)
	}
	req.Header.Set("Accept", MediaTypeResolution)
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("didresolve: resolve %s: %w", did, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResultBytes+1))
	if err != nil {
		return nil, fmt.Errorf("didresolve: resolve %s: read answer: %w", did, err)
	}
	if len(body) > maxResultBytes {
		return nil, fmt.Errorf("didresolve: resolve %s: answer larger than %d bytes", did, maxResultBytes)
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusGone:
	case http.StatusNotFound:
		return nil, fmt.Errorf("%w: %s", ErrNotFound, did)
	case http.StatusBadRequest:
		return nil, fmt.Errorf("%w: %s (refused by the resolver)", ErrInvalidDID, did)
	default:
		return nil, fmt.Errorf("didresolve: resolve %s: HTTP %d", did, resp.StatusCode)
	}
	res, err := DecodeResult(ns, body)
	if err != nil {
		return nil, err
	}
	if (resp.StatusCode == http.StatusGone) != res.DocumentMetadata.Deactivated {
		return nil, fmt.Errorf("didresolve: resolve %s: HTTP %d disagrees with deactivated=%t", did, resp.StatusCode, res.DocumentMetadata.Deactivated)
	}
	r.store(did, res)
	return res, nil
}

// DecodeResult parses and checks a resolution result for the DID of
// namespace: it must carry a document whose id is that DID and whose
// verification methods are Ed25519 keys identified by their keyIds, and a
// deactivated DID must list no methods.
func DecodeResult(namespace string, body []byte) (*Result, error) {
	var res Result
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, fmt.Errorf("didresolve: malformed resolution result: %w", err)
	}
	if res.ResolutionMetadata.Error != "" {
		return nil, fmt.Errorf("didresolve: resolution error %q", res.ResolutionMetadata.Error)
	}
	if res.Document == nil {
		return nil, errors.New("didresolve: resolution result has no didDocument")
	}
	if err := res.Document.check(namespace); err != nil {
		return nil, err
	}
	if res.DocumentMetadata.Deactivated && len(res.Document.VerificationMethod) > 0 {
		return nil, errors.New("didresolve: deactivated DID lists verification methods")
	}
	return &res, nil
}

// Invalidate drops the cached answer for did, e.g. on a request.approved or
// request.revoked event.
func (r *Resolver) Invalidate(did string) {
	r.init()
	did, _, _ = strings.Cut(did, "#")
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.byDID[did]; ok {
		r.lru.Remove(el)
		delete(r.byDID, did)
	}
}

func (r *Resolver) cached(did string) *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	el, ok := r.byDID[did]
	if !ok {
		return nil
	}
	e := el.Value.(*cacheEntry)
	if !r.now().Before(e.expires) {
		r.lru.Remove(el)
		delete(r.byDID, did)
		return nil
	}
	r.lru.MoveToFront(el)
	return e.result
}

func (r *Resolver) store(did string, res *Result) {
	ttl := r.ttl()
	if ttl < 0 {
		return
	}
	max := r.MaxEntries
	if max <= 0 {
		max = 1024
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.byDID[did]; ok {
		r.lru.Remove(el)
	}
	r.byDID[did] = r.lru.PushFront(&cacheEntry{did: did, result: res, expires: r.now().Add(ttl)})
	for r.lru.Len() > max {
		old := r.lru.Back()
		r.lru.Remove(old)
		delete(r.byDID, old.Value.(*cacheEntry).did)
	}
}
