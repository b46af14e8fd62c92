// Package claimcachetest runs the control plane's claims API in memory, for
// tests of code that reads approved claims or submits claims: a
// claimcache.HTTPSource, a claimcache.Submitter, or a whole gateway pointed
// at Server.URL. It is to the claims API what net/http/httptest is to an
// HTTP server: real HTTP on a loopback port, with state the test sets
// (Approve, Revoke, SetUnavailable) and inspects (Submissions, Requests).
//
// A Server answers the two routes a gateway calls, with the control plane's
// error envelope and codes:
//
//   - GET /v1/namespaces/claims, the approved-claims feed of the key's
//     service, paged by limit (1 to 2000, 500 when absent) and offset. Each
//     page carries an ETag that changes whenever the service's approved set
//     does, and a request whose If-None-Match matches it is answered 304.
//     A page may start after a claim instead (?after=<claim_id>). Each
//     page also carries the feed's change cursor, and ?since=<cursor>
//     answers the changes after it, or 410 FEED_CURSOR_EXPIRED once
//     ExpireChanges has dropped them; with &wait=<seconds> (up to 30) and
//     no change yet, the request is held until Approve or Revoke makes one
//     or the wait ends.
//   - POST /v1/claims, a claim submission: 201 with a new pending claim, or
//     200 with the claim the tuple <namespace, public key, service> already
//     has, or with its revoked claim (status "revoked"), when its last
//     claim was revoked and not approved again.
//
// Every service has its own API key, Server.APIKey. A request with another
// key is answered 401 API_KEY_INVALID; one about another service, 403
// SERVICE_MISMATCH. Unlike the control plane, a Server verifies no request
// signature, so the client may sign its requests or not, and it refuses a
// submission with an unknown field, so a misspelt field fails the test
// instead of being dropped.
package claimcachetest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/feedwire"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
)

// Feed paging, as the control plane pages.
const (
	defaultLimit = 500
	maxLimit     = 2000
	// maxBody bounds a submission; a real one is well under 2 KiB.
	maxBody = 64 << 10
)

// Claim statuses the server keeps.
const (
	statusPending  = "pending"
	statusApproved = "approved"
	statusRevoked  = "revoked"
	statusRejected = "rejected"
)

// Server is an in-memory control plane's claims API listening on a loopback
// port. It is safe for concurrent use. It is also the http.Handler it
// serves, for a test that wraps it (to delay or observe a request) behind a
// server of its own.
type Server struct {
	// URL is the base URL, http://127.0.0.1:<port>, for
	// claimcache.HTTPSource.BaseURL, claimcache.SubmitterConfig.BaseURL or a
	// gateway's control-plane address.
	URL string

	srv *httptest.Server

	mu          sync.Mutex
	claims      []*record             // every claim; the approved ones in approval order
	live        map[tupleKey]*record  // the pending or approved claim of each tuple that has one
	feeds       map[string]*feedIndex // per service, its approved claims at feedIndex.version
	versions    map[string]uint64     // per service, bumped by every change to its feed
	changes     map[string][]change   // per service, the changes still served; the last is numbered versions[service]
	submissions []Submission
	requests    []*http.Request
	unavailable bool
	lastID      int
	changed     chan struct{} // closed (and replaced) at every change of a feed
	closing     chan struct{} // closed by Close, to answer held requests
	closeOnce   sync.Once
}

type record struct {
	claim  claimcache.Claim
	status string
}

// tupleKey is a claim's tuple <namespace, public key, service>.
type tupleKey struct{ namespace, publicKey, service string }

// feedIndex is a service's feed at one version: its approved claims in
// order, and, for each claim id a page may start after, the number of
// approved claims up to it. It is built at the first read of a version, so
// that paging a large feed costs each page its own claims.
type feedIndex struct {
	version  uint64
	approved []claimcache.Claim
	after    map[string]int
}

// change is one logged change of a service's feed.
type change struct {
	seq   uint64
	op    string
	claim claimcache.Claim
}

// Submission is a claim submission the server accepted, as the client sent
// it (the public key in its "ed25519:<base64>" form), with the claim it
// created or found.
type Submission struct {
	ClaimID   string
	Created   bool // a new pending claim (201), not an existing claim (200)
	Namespace string
	PublicKey string
	Service   string
	AgentIP   string
	Subject   string
	AgentID   string
	AgentName string
	Nonce     string
}

// NewServer starts a Server with no claims. The caller closes it.
func NewServer() *Server {
	s := &Server{versions: map[string]uint64{}, changes: map[string][]change{}, live: map[tupleKey]*record{}, feeds: map[string]*feedIndex{},
		changed: make(chan struct{}), closing: make(chan struct{})}
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
	return s
}

// Close shuts the listener down, blocking until every request has been
// answered; a request held for changes is answered at once.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.srv.Close()
}

// APIKey returns the API key of service: the key the server accepts for
// that service's feed and submissions, and for no other service.
func (s *Server) APIKey(service string) string {
	sum := sha256.Sum256([]byte("claimcachetest\x00" + service))
	return "idn_sk_test_" + service + "_" + hex.EncodeToString(sum[:8])
}

// serviceOf returns the service whose key is key.
func (s *Server) serviceOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "idn_sk_test_")
	i := strings.LastIndexByte(rest, '_')
	if !ok || i < 1 {
		return "", false
	}
	service := rest[:i]
	return service, key == s.APIKey(service)
}

// Approve puts an approved claim of the tuple <c.Namespace, c.PublicKey,
// c.Service> at the end of its service's feed and returns it as the feed
// serves it. A pending claim of the tuple (one a client submitted) is
// approved under its id, keeping the subject and agent fields c leaves
// empty; otherwise the claim gets c.ID, or a fresh id when
// c.ID is empty. A zero c.ApprovedAt means now. The claim is not checked,
// so a test may serve a record a client must skip.
func (s *Server) Approve(c claimcache.Claim) claimcache.Claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.ApprovedAt.IsZero() {
		c.ApprovedAt = time.Now().UTC().Truncate(time.Microsecond)
	}
	k := tupleKey{c.Namespace, c.PublicKey, c.Service}
	if rec := s.live[k]; rec != nil {
		old := rec.claim
		c.ID = old.ID
		c.Subject = cmp.Or(c.Subject, old.Subject)
		c.AgentID = cmp.Or(c.AgentID, old.AgentID)
		c.AgentName = cmp.Or(c.AgentName, old.AgentName)
		i := slices.Index(s.claims, rec)
		s.claims = slices.Delete(s.claims, i, i+1)
	} else if c.ID == "" {
		c.ID = s.newID()
	}
	s.live[k] = &record{claim: c, status: statusApproved}
	s.claims = append(s.claims, s.live[k])
	s.logChange(feedwire.OpUpsert, c)
	return c
}

// Revoke revokes the pending or approved claim id, which leaves its
// service's feed. A later submission of its tuple files nothing and
// answers the revoked claim, as the control plane does, until Approve
// approves the tuple again under a new claim. It reports whether there
// was such a claim.
func (s *Server) Revoke(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.claims {
		if r.claim.ID == id && r.status != statusRevoked {
			if r.status == statusApproved {
				s.logChange(feedwire.OpDelete, r.claim)
			}
			r.status = statusRevoked
			delete(s.live, tupleKey{r.claim.Namespace, r.claim.PublicKey, r.claim.Service})
			return true
		}
	}
	return false
}

// Reject rejects the pending claim id, as the owner does: the feed's
// changes carry the rejection (a delete with status "rejected"), and a
// later submission of its tuple files nothing and answers the rejected
// claim, until Approve approves the tuple under a new claim. It reports
// whether there was such a claim.
func (s *Server) Reject(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.claims {
		if r.claim.ID == id && r.status == statusPending {
			r.status = statusRejected
			delete(s.live, tupleKey{r.claim.Namespace, r.claim.PublicKey, r.claim.Service})
			s.logChange(opReject, r.claim)
			return true
		}
	}
	return false
}

// opReject is a logged rejection, served as a delete with status
// "rejected".
const opReject = "reject"

// logChange numbers a change of c's service's feed and logs it.
func (s *Server) logChange(op string, c claimcache.Claim) {
	s.versions[c.Service]++
	s.changes[c.Service] = append(s.changes[c.Service], change{seq: s.versions[c.Service], op: op, claim: c})
	close(s.changed)
	s.changed = make(chan struct{})
}

// ExpireChanges drops every change logged so far, as a control plane does
// when it prunes its change log: a client's next request for the changes
// after an earlier cursor is answered 410 FEED_CURSOR_EXPIRED, and it must
// read the whole feed again.
func (s *Server) ExpireChanges() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.changes)
}

// SetUnavailable makes every request, while on, answer 503
// DATABASE_UNAVAILABLE, as a control plane that lost its database does.
func (s *Server) SetUnavailable(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unavailable = on
}

// Submissions returns the submissions the server accepted, oldest first.
func (s *Server) Submissions() []Submission {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Submission(nil), s.submissions...)
}

// Requests returns every request the server received, oldest first, without
// their bodies.
func (s *Server) Requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.requests...)
}

// feedOf returns service's feed at its current version.
func (s *Server) feedOf(service string) *feedIndex {
	if f := s.feeds[service]; f != nil && f.version == s.versions[service] {
		return f
	}
	f := &feedIndex{version: s.versions[service], after: map[string]int{}}
	for _, rec := range s.claims {
		if rec.claim.Service != service {
			continue
		}
		if rec.status == statusApproved {
			f.approved = append(f.approved, rec.claim)
		}
		if rec.status != statusPending {
			f.after[rec.claim.ID] = len(f.approved) // the approved claims up to it, itself included, come before
		}
	}
	s.feeds[service] = f
	return f
}

// ended returns the latest revoked or rejected claim of a tuple, or nil.
func (s *Server) ended(namespace, publicKey, service string) *record {
	for _, r := range slices.Backward(s.claims) {
		c := r.claim
		if (r.status == statusRevoked || r.status == statusRejected) && c.Namespace == namespace && c.PublicKey == publicKey && c.Service == service {
			return r
		}
	}
	return nil
}

// newID returns the next free id of the series clm_001, clm_002, …
func (s *Server) newID() string {
	for {
		s.lastID++
		id := fmt.Sprintf("clm_%03d", s.lastID)
		if !slices.ContainsFunc(s.claims, func(r *record) bool { return r.claim.ID == id }) {
			return id
		}
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	clone := r.Clone(context.Background())
	clone.Body = http.NoBody
	s.requests = append(s.requests, clone)
	unavailable := s.unavailable
	s.mu.Unlock()

	var route func(http.ResponseWriter, *http.Request, string)
	switch {
	case r.URL.Path == "/v1/namespaces/claims" && r.Method == http.MethodGet:
		route = s.feed
	case r.URL.Path == "/v1/claims" && r.Method == http.MethodPost:
		route = s.submit
	case r.URL.Path == "/v1/namespaces/claims" || r.URL.Path == "/v1/claims":
		apierror.Write(w, r, apierror.Coded(errcode.MethodNotAllowed, ""))
		return
	default:
		apierror.Write(w, r, apierror.Coded(errcode.NotFound, ""))
		return
	}
	if unavailable {
		apierror.Write(w, r, apierror.Coded(errcode.DatabaseUnavailable, ""))
		return
	}
	scheme, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	service, ok := s.serviceOf(key)
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		apierror.Write(w, r, apierror.Coded(errcode.APIKeyInvalid, ""))
		return
	}
	route(w, r, service)
}

// feed serves one page of the approved claims of service.
func (s *Server) feed(w http.ResponseWriter, r *http.Request, service string) {
	q := r.URL.Query()
	if slug := q.Get("service"); slug != "" && slug != service {
		apierror.Write(w, r, apierror.Coded(errcode.ServiceMismatch, ""))
		return
	}
	limit, offset, err := page(q.Get("limit"), q.Get("offset"))
	if err != nil {
		apierror.Write(w, r, apierror.Coded(errcode.ValidationError, err.Error()))
		return
	}
	if q.Has(feedwire.SinceQuery) {
		s.feedChanges(w, r, service, limit)
		return
	}
	after, byClaim := q.Get(feedwire.AfterQuery), q.Has(feedwire.AfterQuery)
	if byClaim && q.Has("offset") {
		apierror.Write(w, r, apierror.Coded(errcode.ValidationError, "after and offset cannot be combined"))
		return
	}
	s.mu.Lock()
	feed := s.feedOf(service)
	approved, found := feed.approved, !byClaim
	if byClaim {
		offset, found = feed.after[after]
	}
	etag := pageETag(service, s.versions[service], limit, offset)
	cursor := feedwire.FormatCursor(int64(s.versions[service]))
	s.mu.Unlock()

	if !found {
		apierror.Write(w, r, apierror.Coded(errcode.ValidationError, "after must be the claim_id of a record the feed returned"))
		return
	}
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	end := min(offset+limit, len(approved))
	page := feedwire.Page{Claims: []feedwire.Record{}, Cursor: cursor,
		Pagination: feedwire.Pagination{Limit: limit, Offset: offset, Total: len(approved), HasMore: end < len(approved)}}
	for _, c := range approved[min(offset, end):end] {
		page.Claims = append(page.Claims, feedwire.Record{ClaimID: c.ID, Namespace: c.Namespace, PublicKey: c.PublicKey,
			Service: c.Service, ApprovedAt: c.ApprovedAt, Subject: c.Subject, AgentID: c.AgentID, AgentName: c.AgentName})
	}
	writeJSON(w, http.StatusOK, page)
}

// feedChanges serves the changes of service's feed after ?since=, at most
// limit of them; with ?wait=<seconds> and none yet, it holds the request
// until one is logged or the wait ends.
func (s *Server) feedChanges(w http.ResponseWriter, r *http.Request, service string, limit int) {
	since, err := feedwire.ParseCursor(r.URL.Query().Get(feedwire.SinceQuery))
	if err != nil || r.URL.Query().Has("offset") {
		apierror.Write(w, r, apierror.Coded(errcode.ValidationError, "since must be a cursor the feed returned, without offset"))
		return
	}
	wait := 0
	if q := r.URL.Query(); q.Has(feedwire.WaitQuery) {
		if wait, err = strconv.Atoi(q.Get(feedwire.WaitQuery)); err != nil || wait < 0 || wait > 30 {
			apierror.Write(w, r, apierror.Coded(errcode.ValidationError, "wait must be whole seconds from 0 to 30"))
			return
		}
	}
	end := time.After(time.Duration(wait) * time.Second)
	s.mu.Lock()
	for wait > 0 && s.versions[service] == uint64(since) {
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-end:
			wait = 0
		case <-s.closing:
			wait = 0
		case <-r.Context().Done():
			return
		}
		s.mu.Lock()
	}
	log, version := s.changes[service], s.versions[service]
	first := version - uint64(len(log)) // changes up to first are gone
	if uint64(since) < first || uint64(since) > version {
		s.mu.Unlock()
		apierror.Write(w, r, apierror.Coded(errcode.FeedCursorExpired, ""))
		return
	}
	next := log[uint64(since)-first:]
	out := feedwire.Changes{Changes: []feedwire.Change{}, Cursor: feedwire.FormatCursor(since), More: len(next) > limit}
	for _, ch := range next[:min(limit, len(next))] {
		c := ch.claim
		wc := feedwire.Change{Op: ch.op, ClaimID: c.ID, Namespace: c.Namespace, PublicKey: c.PublicKey, Service: c.Service}
		if ch.op == opReject {
			wc.Op, wc.Status = feedwire.OpDelete, feedwire.StatusRejected
		}
		if ch.op == feedwire.OpUpsert {
			wc.ApprovedAt, wc.Subject, wc.AgentID, wc.AgentName = c.ApprovedAt, c.Subject, c.AgentID, c.AgentName
		}
		out.Changes = append(out.Changes, wc)
		out.Cursor = feedwire.FormatCursor(int64(ch.seq))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// page parses limit and offset as the control plane does.
func page(limitParam, offsetParam string) (limit, offset int, err error) {
	limit = defaultLimit
	if limitParam != "" {
		if limit, err = strconv.Atoi(limitParam); err != nil || limit < 1 || limit > maxLimit {
			return 0, 0, fmt.Errorf("limit must be an integer from 1 to %d", maxLimit)
		}
	}
	if offsetParam != "" {
		if offset, err = strconv.Atoi(offsetParam); err != nil || offset < 0 {
			return 0, 0, errors.New("offset must be a non-negative integer")
		}
	}
	return limit, offset, nil
}

// pageETag is a strong validator of one page of one version of a feed, so
// the first page's ETag identifies the whole approved set.
func pageETag(service string, version uint64, limit, offset int) string {
	var b [24]byte
	binary.BigEndian.PutUint64(b[0:], version)
	binary.BigEndian.PutUint64(b[8:], uint64(limit))
	binary.BigEndian.PutUint64(b[16:], uint64(offset))
	sum := sha256.Sum256(append(b[:], service...))
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// submission is the body of POST /v1/claims.
type submission struct {
	Namespace string `json:"namespace"`
	PublicKey string `json:"public_key"`
	Service   string `json:"service"`
	AgentIP   string `json:"agent_ip"`
	Subject   string `json:"subject"`
	AgentID   string `json:"agent_id"`
	AgentName string `json:"agent_name"`
	Nonce     string `json:"nonce"`
}

// submit files a claim submission for service.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, service string) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		apierror.Write(w, r, apierror.Coded(errcode.UnsupportedMediaType, ""))
		return
	}
	in, err := decodeSubmission(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		apierror.Write(w, r, apierror.Coded(errcode.ValidationError, err.Error()))
		return
	}
	if identity.ValidNamespace(in.Namespace) != nil {
		apierror.Write(w, r, apierror.Coded(errcode.NamespaceInvalid, ""))
		return
	}
	pub, err := identity.ParsePublicKey(in.PublicKey)
	switch {
	case err != nil:
		apierror.Write(w, r, apierror.Coded(errcode.ValidationError, "public_key must be ed25519:<base64> or a multibase Ed25519 key"))
		return
	case in.Service == "":
		apierror.Write(w, r, apierror.Coded(errcode.ValidationError, "service is required"))
		return
	case in.Service != service:
		apierror.Write(w, r, apierror.Coded(errcode.ServiceMismatch, ""))
		return
	}
	if in.AgentIP != "" {
		if _, err := netip.ParseAddr(in.AgentIP); err != nil {
			apierror.Write(w, r, apierror.Coded(errcode.ValidationError, "agent_ip must be an IP address"))
			return
		}
	}
	sub := Submission{Namespace: in.Namespace, PublicKey: identity.FormatPublicKey(pub), Service: in.Service,
		AgentIP: in.AgentIP, Subject: in.Subject, AgentID: in.AgentID, AgentName: in.AgentName, Nonce: in.Nonce}

	s.mu.Lock()
	rec := &record{status: statusPending, claim: claimcache.Claim{Namespace: sub.Namespace, PublicKey: sub.PublicKey,
		Service: sub.Service, Subject: sub.Subject, AgentID: sub.AgentID, AgentName: sub.AgentName}}
	if held := s.live[tupleKey{sub.Namespace, sub.PublicKey, sub.Service}]; held != nil {
		rec = held
	} else if r := s.ended(sub.Namespace, sub.PublicKey, sub.Service); r != nil {
		rec = r
	} else {
		rec.claim.ID = s.newID()
		s.claims = append(s.claims, rec)
		s.live[tupleKey{sub.Namespace, sub.PublicKey, sub.Service}] = rec
		sub.Created = true
	}
	sub.ClaimID = rec.claim.ID
	s.submissions = append(s.submissions, sub)
	answer := map[string]any{"claim_id": rec.claim.ID, "namespace": rec.claim.Namespace, "public_key": rec.claim.PublicKey,
		"service": rec.claim.Service, "status": rec.status}
	s.mu.Unlock()

	status := http.StatusOK
	if sub.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, answer)
}

func decodeSubmission(body io.Reader) (submission, error) {
	var in submission
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return submission{}, fmt.Errorf("request body is not a valid submission: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return submission{}, errors.New("request body must be a single JSON object")
	}
	return in, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
