package claimcache

import (
	"bytes"
	"cmp"
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

	"github.com/idnhq/idn/kit/keyrate"
)

// Defaults of SubmitterConfig.
const (
	// DefaultSubmitRatePerMinute is GATEWAY_CLAIM_REGISTRATION_RATE_LIMIT_PER_MINUTE's default.
	DefaultSubmitRatePerMinute = 30
	// DefaultMaxLimiters bounds how many connection + namespace limiters are
	// remembered.
	DefaultMaxLimiters = 10_000
	// DefaultReceiptTTL is how long a receipt answers repeated submissions
	// of its tuple.
	DefaultReceiptTTL = time.Minute
	// DefaultMaxReceipts bounds how many receipts are remembered.
	DefaultMaxReceipts = 10_000
	// DefaultMaxReceiptsPerNamespace bounds how many of them one namespace
	// holds.
	DefaultMaxReceiptsPerNamespace = 100
)

// SubmitterConfig configures a Submitter: where and as whom claims are
// submitted, and the SubmitterOptions policy.
type SubmitterConfig struct {
	// BaseURL is the control plane's base address ({IDN_REGISTRY_URL}).
	// Required.
	BaseURL string
	// Client sends the requests; the gateway passes one whose transport adds
	// its signed headers. Nil means http.DefaultClient. Redirects are
	// never followed, whatever its CheckRedirect says: a 3xx is a
	// StatusError, so the key and the signature reach BaseURL only.
	Client *http.Client
	// APIKey returns the service API key for a connection. Required; the key
	// is never written into errors. An empty key with a nil error sends no
	// Authorization header: the submission stands on the client's signature
	// alone, as a gateway paired with the service's owner may.
	APIKey func(connectionID string) (string, error)

	SubmitterOptions

	// Clock returns the current time for the rate limit and the receipts'
	// age. Nil means time.Now.
	Clock func() time.Time
}

// SubmitterOptions is the submission policy: the rate limit and the memory
// bounds. Its zero value is the safe default: each field left at zero takes
// the documented default; the rate limit and the receipts are switched off
// only by a negative value.
type SubmitterOptions struct {
	// RatePerMinute is how many submissions one connection + namespace pair
	// may make per minute (with an equal burst). Zero means
	// DefaultSubmitRatePerMinute; negative means no limit (what the setting's
	// value 0 asks for).
	RatePerMinute int
	// MaxLimiters bounds the remembered pairs; the least recently used one is
	// forgotten first, so random namespaces cannot grow memory. Zero means
	// DefaultMaxLimiters.
	MaxLimiters int
	// ReceiptTTL is how long the receipt of a tuple (connection, namespace,
	// public key, service) answers later submissions of the same tuple
	// without a call to the control plane and without spending the rate
	// limit, so an agent polling while it waits for approval keeps its
	// claim id. Zero means DefaultReceiptTTL; negative means no memory.
	ReceiptTTL time.Duration
	// MaxReceipts bounds the remembered receipts; the oldest is forgotten
	// first, so self-made identities cannot grow memory. Zero means
	// DefaultMaxReceipts.
	MaxReceipts int
	// MaxReceiptsPerNamespace bounds the remembered receipts of one
	// namespace; its own oldest is forgotten first, so one namespace's
	// submissions cannot push the receipts of others out. Zero means
	// DefaultMaxReceiptsPerNamespace; it is capped at MaxReceipts.
	MaxReceiptsPerNamespace int
}

// Submission is one claim submitted for an unapproved caller.
type Submission struct {
	ConnectionID string // selects the rate-limit bucket and the API key; not sent
	Namespace    string
	PublicKey    string // "ed25519:<base64>", as in the idn-agent-key header
	Service      string
	AgentIP      string // optional; the caller's address
	Subject      string // optional
	AgentName    string // optional; the display name the agent's certificate carries
	Nonce        string // optional
}

// Receipt is the control plane's answer to a submission.
type Receipt struct {
	ClaimID string
	Status  string // e.g. "pending", or "approved" for an existing claim
	Created bool   // true for 201 (new claim), false for 200 (existing)
}

// Submitter posts claims to the control plane (POST {BaseURL}/v1/claims)
// under a per connection + namespace rate limit. It is safe for concurrent
// use.
type Submitter struct {
	endpoint string
	client   *http.Client
	apiKey   func(string) (string, error)
	limits   *keyrate.Buckets // nil when unlimited
	receipts *receipts        // nil without memory
	clock    func() time.Time
}

// NewSubmitter returns a Submitter configured by cfg.
func NewSubmitter(cfg SubmitterConfig) (*Submitter, error) {
	if cfg.BaseURL == "" || cfg.APIKey == nil {
		return nil, errors.New("claimcache: SubmitterConfig needs BaseURL and APIKey")
	}
	endpoint, err := url.JoinPath(cfg.BaseURL, "v1/claims")
	if err != nil {
		return nil, fmt.Errorf("claimcache: BaseURL: %w", err)
	}
	if cfg.MaxLimiters < 0 {
		return nil, fmt.Errorf("claimcache: MaxLimiters %d is negative", cfg.MaxLimiters)
	}
	if cfg.MaxReceipts < 0 || cfg.MaxReceiptsPerNamespace < 0 {
		return nil, fmt.Errorf("claimcache: MaxReceipts %d or MaxReceiptsPerNamespace %d is negative", cfg.MaxReceipts, cfg.MaxReceiptsPerNamespace)
	}
	s := &Submitter{endpoint: endpoint, client: noRedirects(cfg.Client), apiKey: cfg.APIKey, clock: cfg.Clock}
	if s.clock == nil {
		s.clock = time.Now
	}
	perMinute := cfg.RatePerMinute
	if perMinute == 0 {
		perMinute = DefaultSubmitRatePerMinute
	}
	if perMinute > 0 {
		max := cfg.MaxLimiters
		if max == 0 {
			max = DefaultMaxLimiters
		}
		s.limits = keyrate.New(perMinute, max)
	}
	if cfg.ReceiptTTL >= 0 {
		s.receipts = newReceipts(cmp.Or(cfg.ReceiptTTL, DefaultReceiptTTL), cmp.Or(cfg.MaxReceipts, DefaultMaxReceipts))
		s.receipts.perNamespace = min(s.receipts.max, cmp.Or(cfg.MaxReceiptsPerNamespace, DefaultMaxReceiptsPerNamespace))
	}
	return s, nil
}

// Submit sends sub unless its connection + namespace pair is over the rate
// limit, in which case it returns ErrRateLimited and sends nothing. A tuple
// submitted within ReceiptTTL is answered with its remembered receipt
// (Created false) before the rate limit is consulted, and nothing is sent;
// so is a tuple whose submission is in flight, once that one is answered.
// Other failures are a *StatusError for an unexpected answer, or a
// transport error.
func (s *Submitter) Submit(ctx context.Context, sub Submission) (Receipt, error) {
	now := s.clock()
	tuple := submissionTuple(sub)
	rc, inflight, lead := s.receipts.begin(tuple, now)
	switch {
	case inflight != nil:
		select {
		case <-inflight.done:
			rc := inflight.rc
			rc.Created = false
			return rc, inflight.err
		case <-ctx.Done():
			return Receipt{}, fmt.Errorf("claimcache: waiting for the submission in flight: %w", ctx.Err())
		}
	case !lead:
		return rc, nil
	}
	rc, err := s.send(ctx, sub, now)
	s.receipts.end(tuple, rc, err, now)
	return rc, err
}

// submissionTuple is the key of sub's receipt: connection, namespace,
// public key and service, separated by NULs (which none of them contains).
func submissionTuple(sub Submission) string {
	return sub.ConnectionID + "\x00" + sub.Namespace + "\x00" + sub.PublicKey + "\x00" + sub.Service
}

// tupleNamespace returns the namespace of a submissionTuple.
func tupleNamespace(tuple string) string {
	_, rest, _ := strings.Cut(tuple, "\x00")
	ns, _, _ := strings.Cut(rest, "\x00")
	return ns
}

// send applies the rate limit and posts sub.
func (s *Submitter) send(ctx context.Context, sub Submission, now time.Time) (Receipt, error) {
	if s.limits != nil && s.limits.Take(sub.ConnectionID+"\x00"+sub.Namespace, now) > 0 {
		return Receipt{}, fmt.Errorf("%w: connection %q", ErrRateLimited, sub.ConnectionID)
	}
	key, err := s.apiKey(sub.ConnectionID)
	if err != nil {
		return Receipt{}, fmt.Errorf("claimcache: API key for connection %q: %w", sub.ConnectionID, err)
	}
	body, err := json.Marshal(struct {
		Namespace string `json:"namespace"`
		PublicKey string `json:"public_key"`
		Service   string `json:"service"`
		AgentIP   string `json:"agent_ip,omitempty"`
		Subject   string `json:"subject,omitempty"`
		AgentName string `json:"agent_name,omitempty"`
		Nonce     string `json:"nonce,omitempty"`
	}{sub.Namespace, sub.PublicKey, sub.Service, sub.AgentIP, sub.Subject, sub.AgentName, sub.Nonce})
	if err != nil {
		return Receipt{}, fmt.Errorf("claimcache: encoding submission: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return Receipt{}, fmt.Errorf("claimcache: submit request: %w", err)
	}
	setAPIKey(req.Header, key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return Receipt{}, fmt.Errorf("claimcache: submit: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return Receipt{}, statusError("submit", resp)
	}
	var answer struct {
		ClaimID string `json:"claim_id"`
		Status  string `json:"status"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBytes)).Decode(&answer); err != nil {
		return Receipt{}, fmt.Errorf("claimcache: submit answer: malformed JSON: %w", err)
	}
	if answer.ClaimID == "" {
		return Receipt{}, errors.New("claimcache: submit answer has no claim_id")
	}
	return Receipt{ClaimID: answer.ClaimID, Status: answer.Status, Created: resp.StatusCode == http.StatusCreated}, nil
}

// receipts remembers the answers to recent submissions, newest first, for
// at most ttl, max entries and perNamespace entries of one namespace, and
// the submissions in flight (at most one per tuple, each gone when
// answered).
type receipts struct {
	mu           sync.Mutex
	ttl          time.Duration
	max          int
	perNamespace int
	order        *list.List // front: newest; values are *receiptEntry
	byTuple      map[string]*list.Element
	byNamespace  map[string]*list.List // front: newest; values are order's elements
	inflight     map[string]*inflightSubmit
}

// inflightSubmit is a submission others with the same tuple wait for.
type inflightSubmit struct {
	done chan struct{} // closed when rc and err are set
	rc   Receipt
	err  error
}

type receiptEntry struct {
	tuple     string
	namespace string
	inNS      *list.Element // the entry's element in byNamespace[namespace]
	rc        Receipt
	at        time.Time
}

// newReceipts returns receipts bounded by ttl and max; each namespace may
// hold all max until perNamespace is lowered.
func newReceipts(ttl time.Duration, max int) *receipts {
	return &receipts{ttl: ttl, max: max, perNamespace: max, order: list.New(), byTuple: make(map[string]*list.Element),
		byNamespace: make(map[string]*list.List), inflight: make(map[string]*inflightSubmit)}
}

// begin returns the receipt remembered for tuple (marked as not created by
// this call), or the submission of tuple in flight, or lead true: the
// caller submits and must call end. A nil *receipts remembers nothing and
// always lets the caller lead.
func (m *receipts) begin(tuple string, now time.Time) (rc Receipt, inflight *inflightSubmit, lead bool) {
	if m == nil {
		return Receipt{}, nil, true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.byTuple[tuple]; ok {
		e := el.Value.(*receiptEntry)
		if now.Sub(e.at) < m.ttl {
			rc = e.rc
			rc.Created = false
			return rc, nil, false
		}
		m.remove(el)
	}
	if f, ok := m.inflight[tuple]; ok {
		return Receipt{}, f, false
	}
	m.inflight[tuple] = &inflightSubmit{done: make(chan struct{})}
	return Receipt{}, nil, true
}

// end records the answer of the submission begin let the caller lead:
// those waiting get it, and a receipt is remembered.
func (m *receipts) end(tuple string, rc Receipt, err error, now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.inflight[tuple]
	delete(m.inflight, tuple)
	f.rc, f.err = rc, err
	close(f.done)
	if err != nil {
		return
	}
	if el, ok := m.byTuple[tuple]; ok {
		m.remove(el)
	}
	namespace := tupleNamespace(tuple)
	if ns := m.byNamespace[namespace]; ns != nil && ns.Len() >= m.perNamespace {
		// The namespace pays for its own new receipt.
		m.remove(ns.Back().Value.(*list.Element))
	}
	ns := m.byNamespace[namespace]
	if ns == nil {
		ns = list.New()
		m.byNamespace[namespace] = ns
	}
	e := &receiptEntry{tuple: tuple, namespace: namespace, rc: rc, at: now}
	el := m.order.PushFront(e)
	e.inNS = ns.PushFront(el)
	m.byTuple[tuple] = el
	for oldest := m.order.Back(); oldest != nil; oldest = m.order.Back() {
		if m.order.Len() <= m.max && now.Sub(oldest.Value.(*receiptEntry).at) < m.ttl {
			break
		}
		m.remove(oldest)
	}
}

func (m *receipts) remove(el *list.Element) {
	e := el.Value.(*receiptEntry)
	delete(m.byTuple, e.tuple)
	m.order.Remove(el)
	if ns := m.byNamespace[e.namespace]; ns != nil {
		ns.Remove(e.inNS)
		if ns.Len() == 0 {
			delete(m.byNamespace, e.namespace)
		}
	}
}
