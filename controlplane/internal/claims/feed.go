package claims

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"
	"sync"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/claimcache/feedwire"
)

// claimsFeed serves the approved claims of the service (the key's, or the
// one ?service= names of the paired gateway's owner), or with
// ?since=<cursor> the changes to them after that cursor (claimsChanges).
//
// The service's feed_state row (kept by triggers) gives the total and a
// version that changes with every approval or revocation, so the ETag is
// derived from (Service, version, limit, offset) and a poll of an unchanged
// feed is answered 304 without reading any claim. Sequential pagination is
// keyset paging in disguise: the sort key ending each page is remembered
// for (Service, version, next offset), and a request for that offset at the
// same version continues from the key instead of skipping offset rows.
// A client may also page by the last claim it read (?after=<claim_id>),
// which is keyset paging in the open: it neither skips nor repeats a claim
// however the feed changes meanwhile. Every page carries the version read
// before it as "cursor": a client that read every page continues with the
// changes after its first page's cursor, which replays whatever changed
// while it paged.
func (s *Core) claimsFeed(w http.ResponseWriter, r *http.Request, st standing) {
	q := r.URL.Query()
	svc, ok := s.admit.service(w, r, st, q.Get("service"))
	if !ok {
		return
	}
	if q.Has(feedwire.SinceQuery) {
		s.claimsChanges(w, r, svc)
		return
	}
	limit, offset, e := pageParams(q, feedDefaultLimit, feedMaxLimit)
	if e != nil {
		apierror.Write(w, r, e)
		return
	}
	var after *feedCursor
	if q.Has(feedwire.AfterQuery) {
		if q.Has("offset") {
			apierror.Write(w, r, web.Validation("after and offset cannot be combined"))
			return
		}
		k, err := s.store.feedKey(r.Context(), svc.Slug, q.Get(feedwire.AfterQuery))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		after = &k
	}
	total, version, err := s.store.feedState(r.Context(), svc.Slug)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	key := cursorKey{service: svc.Slug, version: version, offset: offset}
	if after == nil {
		etag := feedETag(svc.Slug, version, limit, offset)
		h.Set("ETag", etag)
		if etagMatch(r.Header.Get("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if offset > 0 {
			after = s.cursors.get(key)
		}
	}
	p, err := s.store.feed(r.Context(), svc.Slug, after, limit, offset)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page := feedwire.Page{Claims: make([]feedwire.Record, len(p.Claims)), Cursor: feedwire.FormatCursor(version),
		Pagination: feedwire.Pagination{Limit: limit, Offset: offset, Total: int(total), HasMore: p.HasMore}}
	for i, c := range p.Claims {
		page.Claims[i] = feedwire.Record{ClaimID: c.ID, Namespace: c.Namespace, PublicKey: c.PublicKey, Service: c.Service,
			ApprovedAt: c.ApprovedAt.UTC(), Subject: c.Subject, AgentID: c.AgentID, AgentName: c.AgentName}
	}
	if p.HasMore && !q.Has(feedwire.AfterQuery) {
		last := p.Claims[len(p.Claims)-1]
		key.offset = offset + len(p.Claims)
		s.cursors.put(key, feedCursor{approvedAt: sqldb.Micros(last.ApprovedAt), id: last.ID})
	}
	body, err := json.Marshal(page)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(body, '\n'))
}

// claimsChanges answers the changes to the service's feed after the cursor
// in ?since=, at most limit of them: an index range of the change log, so
// the cost follows the number of changes, not the size of the feed. A
// cursor whose changes were pruned, or that this database never issued,
// is answered 410 FEED_CURSOR_EXPIRED and the client reads the whole feed
// again. With ?wait=<seconds> and no change yet, the request is held until
// one commits or the wait ends (waitChanges).
func (s *Core) claimsChanges(w http.ResponseWriter, r *http.Request, svc Service) {
	q := r.URL.Query()
	if q.Has("offset") {
		apierror.Write(w, r, web.Validation("since and offset cannot be combined"))
		return
	}
	since, err := feedwire.ParseCursor(q.Get(feedwire.SinceQuery))
	if err != nil {
		apierror.Write(w, r, web.Validation("since must be a cursor the feed returned"))
		return
	}
	limit, _, e := pageParams(q, feedDefaultLimit, feedMaxLimit)
	if e != nil {
		apierror.Write(w, r, e)
		return
	}
	wait, e := waitParam(q)
	if e != nil {
		apierror.Write(w, r, e)
		return
	}
	changes, more, err := s.waitChanges(r.Context(), svc.Slug, since, limit, wait)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := feedwire.Changes{Changes: make([]feedwire.Change, len(changes)), Cursor: feedwire.FormatCursor(since), More: more}
	for i, ch := range changes {
		c := ch.Claim
		op, status := ch.Op, ""
		if op == feedOpReject {
			op, status = feedwire.OpDelete, feedwire.StatusRejected
		}
		out.Changes[i] = feedwire.Change{Op: op, Status: status, ClaimID: c.ID, Namespace: c.Namespace, PublicKey: c.PublicKey, Service: c.Service,
			ApprovedAt: c.ApprovedAt, Subject: c.Subject, AgentID: c.AgentID, AgentName: c.AgentName}
		out.Cursor = feedwire.FormatCursor(ch.Seq)
	}
	body, err := json.Marshal(out)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(body, '\n'))
}

// feedETag is an opaque strong validator of one feed page.
func feedETag(slug string, version int64, limit, offset int) string {
	var b [24]byte
	binary.BigEndian.PutUint64(b[0:], uint64(version))
	binary.BigEndian.PutUint64(b[8:], uint64(limit))
	binary.BigEndian.PutUint64(b[16:], uint64(offset))
	sum := sha256.Sum256(append(b[:], slug...))
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

type cursorKey struct {
	service string
	version int64
	offset  int
}

// cursorCache remembers page-ending sort keys, at most max of them. The
// cache is shared by every service, so when it is full the oldest entry of
// the service holding the most goes: a service paging through many
// offsets evicts its own cursors, never another's while it holds more. A
// stale entry is harmless: its version no longer matches.
type cursorCache struct {
	mu        sync.Mutex
	max       int
	m         map[cursorKey]feedCursor
	byService map[string][]cursorKey // insertion order per service, for eviction
}

func newCursorCache(max int) *cursorCache {
	return &cursorCache{max: max, m: make(map[cursorKey]feedCursor, max), byService: map[string][]cursorKey{}}
}

func (c *cursorCache) get(k cursorKey) *feedCursor {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	if !ok {
		return nil
	}
	return &v
}

func (c *cursorCache) put(k cursorKey, v feedCursor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok {
		for len(c.m) >= c.max {
			c.evictFromLargest()
		}
		c.byService[k.service] = append(c.byService[k.service], k)
	}
	c.m[k] = v
}

// evictFromLargest drops the oldest entry of the service holding the most.
// The caller holds c.mu.
func (c *cursorCache) evictFromLargest() {
	largest := ""
	for svc, keys := range c.byService {
		if len(keys) > len(c.byService[largest]) {
			largest = svc
		}
	}
	keys := c.byService[largest]
	delete(c.m, keys[0])
	if len(keys) == 1 {
		delete(c.byService, largest)
		return
	}
	c.byService[largest] = keys[1:]
}
