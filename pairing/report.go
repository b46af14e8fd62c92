package pairing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/pairing/pairwire"
)

// Activity is one decision of the gateway about an agent's request, as
// the owner's Activity page shows it. It never holds a body, a query
// string, a header or a secret: Route is a template (proxy.RouteTemplate).
type Activity struct {
	At                  time.Time
	AgentName, AgentKey string
	Connection, Service string
	MCP                 bool
	// Method is the HTTP method, or for MCP the JSON-RPC method; Tool the
	// MCP tool of a tools/call.
	Method, Route, Tool string
	Allowed             bool
	Reason              string // the error code of a refusal or failure
	Status              int
	Latency             time.Duration
	// OAuthAccount: the connection is oauth2_authorization_code; Account
	// is the subject of the account that served the call ("" for the
	// connection's one account), never a token.
	// AccountNeedsReconnecting: the provider refused its refresh token.
	OAuthAccount             bool
	Account                  string
	AccountNeedsReconnecting bool
	// Event, when set, makes the record a change of the gateway's own
	// (pairwire.Activity's Event) rather than a decision on a request.
	Event string
}

// Defaults of ReporterConfig.
const (
	DefaultReportInterval      = time.Second
	DefaultReportQueue         = 10_000
	DefaultUnsignedReportQueue = 1_000
)

// ReporterConfig configures a Reporter.
type ReporterConfig struct {
	// ControlPlaneURL is the control plane the gateway is paired with.
	// Required.
	ControlPlaneURL string
	// Identity signs every report: the gateway's own identity, the key
	// the pairing bound. Required.
	Identity *identity.Identity
	// DataDir, when set, holds the pairing state (pairing.json, written by
	// the process that pairs): records are queued only once it says the
	// gateway is paired (it is read every 2 s until then). Empty means the
	// gateway counts as paired. Once the control plane answers that it is
	// not paired, nothing is queued for a minute, then the state is read
	// again.
	DataDir string
	// Files, when set, holds the pairing state instead of DataDir (a
	// fleet's shared store).
	Files Files
	// Interval is how often the queue is sent (sooner when a full batch
	// is waiting); zero means DefaultReportInterval.
	Interval time.Duration
	// MaxQueue bounds the records of verified agents waiting to be sent;
	// past it a record is dropped and counted (Dropped), so the request
	// path never waits. While sending fails, the records taken for it (at
	// most as many again) wait too. Zero means DefaultReportQueue.
	MaxQueue int
	// MaxUnsignedQueue bounds, in the same way and apart, the records with
	// no verified agent (the unsigned development bypass). Zero means
	// DefaultUnsignedReportQueue.
	MaxUnsignedQueue int
	// Transport carries the reports (signed on top of it). Nil means
	// http.DefaultTransport.
	Transport http.RoundTripper
	// Logger receives delivery problems, never a record. Nil discards.
	Logger *slog.Logger
}

// Reporter sends the gateway's decisions to its owner's control plane
// (POST pairwire.ActivityPath, signed by the gateway's identity): Record
// queues one in memory without blocking, and Run sends the queues in
// batches of at most pairwire.MaxActivityBatch every Interval, verified
// agents' records first. A batch the control plane could not take is kept
// for the next try (backing off up to 30 s) as far as the queue has room;
// a record that finds its queue full is dropped and counted, and the
// control plane is told how many in the next batch.
//
// A refusal before a signature verified is not queued but counted by
// protocol and reason: anyone can send such requests, as fast as they
// like, so they must not crowd out or outnumber the agents' records.
// Safe for concurrent use.
type Reporter struct {
	cfg    ReporterConfig
	client *http.Client
	log    *slog.Logger
	url    string

	paired  atomic.Bool
	dropped atomic.Int64
	sent    atomic.Int64
	wake    chan struct{}

	mu         sync.Mutex
	signed     reportQueue
	unsigned   reportQueue
	unverified map[unverifiedKind]unverifiedCount
	batch      []Activity // the records being sent; only flush uses it
	buf        []byte     // the body being built; only flush uses it
}

// reportQueue is one class of records waiting to be sent.
type reportQueue struct {
	max     int
	queue   []Activity
	unsaid  int64      // dropped since the last batch sent
	pending []Activity // taken from the queue, sent up to sentTo
	sentTo  int
}

// add queues a, or counts it dropped when the queue is full.
func (q *reportQueue) add(a Activity) bool {
	if len(q.queue) >= q.max {
		q.unsaid++
		return false
	}
	q.queue = append(q.queue, a)
	return true
}

// next is up to n records to send next: the pending ones, or the whole
// queue once they are sent (so the records behind a batch are never
// copied forward). A failure leaves them pending for the next try.
func (q *reportQueue) next(n int) []Activity {
	if q.sentTo == len(q.pending) {
		q.pending, q.queue, q.sentTo = q.queue, q.pending[:0], 0
	}
	return q.pending[q.sentTo:min(q.sentTo+n, len(q.pending))]
}

// unverifiedKind is what refusals before a signature verified are
// counted by.
type unverifiedKind struct {
	mcp    bool
	reason string
}

type unverifiedCount struct {
	at time.Time // the first one's
	n  int64
}

// otherReason counts the refusals with no reason, and those of a kind
// past MaxUnverifiedCounts distinct ones (the gateway's codes are far
// fewer).
const otherReason = "OTHER"

// NewReporter returns a Reporter; call Run to send.
func NewReporter(cfg ReporterConfig) (*Reporter, error) {
	if cfg.ControlPlaneURL == "" || cfg.Identity == nil {
		return nil, errors.New("pairing: ReporterConfig.ControlPlaneURL and Identity are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultReportInterval
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = DefaultReportQueue
	}
	if cfg.MaxUnsignedQueue <= 0 {
		cfg.MaxUnsignedQueue = DefaultUnsignedReportQueue
	}
	r := &Reporter{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1),
		signed: reportQueue{max: cfg.MaxQueue}, unsigned: reportQueue{max: cfg.MaxUnsignedQueue},
		unverified: map[unverifiedKind]unverifiedCount{},
		url:        strings.TrimSuffix(cfg.ControlPlaneURL, "/") + pairwire.ActivityPath,
		client: &http.Client{
			Timeout:       10 * time.Second,
			Transport:     cfg.Identity.Transport(cfg.Transport, identity.SignOptions{}),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.checkPaired()
	return r, nil
}

// Record queues a, or counts it when it is a refusal with no verified
// agent (AgentKey "" and not Allowed); it never blocks. While the gateway
// is not paired it does nothing.
func (r *Reporter) Record(a Activity) {
	if !r.paired.Load() {
		return
	}
	r.mu.Lock()
	if a.AgentKey == "" && !a.Allowed && a.Event == "" {
		r.countUnverified(a)
		r.mu.Unlock()
		return
	}
	// An event of the gateway's own is queued with the agents' records:
	// no stranger chose it.
	q := &r.signed
	if a.AgentKey == "" && a.Event == "" {
		q = &r.unsigned
	}
	queued := q.add(a)
	full := len(q.queue) == pairwire.MaxActivityBatch
	r.mu.Unlock()
	if !queued {
		r.dropped.Add(1)
		return
	}
	if full {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// countUnverified counts a refusal before a signature verified; r.mu is
// held.
func (r *Reporter) countUnverified(a Activity) {
	k := unverifiedKind{mcp: a.MCP, reason: a.Reason}
	if k.reason == "" {
		k.reason = otherReason
	}
	c, ok := r.unverified[k]
	if !ok && len(r.unverified) >= pairwire.MaxUnverifiedCounts-1 {
		k.reason = otherReason
		c, ok = r.unverified[k]
	}
	if !ok {
		c.at = a.At
	}
	c.n++
	r.unverified[k] = c
}

// Dropped is how many records found their queue full.
func (r *Reporter) Dropped() int64 { return r.dropped.Load() }

// Sent is how many records the control plane took.
func (r *Reporter) Sent() int64 { return r.sent.Load() }

// pairedRecheck is how often the pairing state is read while the gateway
// is not paired.
const pairedRecheck = 2 * time.Second

// checkPaired reads the pairing state.
func (r *Reporter) checkPaired() {
	f := r.cfg.Files
	if f == nil && r.cfg.DataDir != "" {
		f = DirFiles(r.cfg.DataDir)
	}
	if f == nil {
		r.paired.Store(true)
		return
	}
	_, ok, err := loadState(f)
	r.paired.Store(ok && err == nil)
}

// Run sends the queue until ctx ends, then tries once more (for at most
// 5 s) to send what is left, and returns nil.
func (r *Reporter) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	var failures int
	var notBefore, checked time.Time
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			r.flush(fctx)
			cancel()
			return nil
		case <-t.C:
		case <-r.wake:
		}
		now := time.Now()
		if !r.paired.Load() && now.Sub(checked) >= pairedRecheck && now.After(notBefore) {
			r.checkPaired()
			checked = now
		}
		if now.Before(notBefore) {
			continue
		}
		switch err := r.flush(ctx); {
		case err == nil:
			failures = 0
		case errors.Is(err, errReportNotPaired):
			// Unpaired since: nothing is queued until the state says
			// otherwise, read again in a minute.
			r.paired.Store(false)
			r.mu.Lock()
			r.signed.queue, r.signed.pending, r.signed.sentTo = nil, nil, 0
			r.unsigned.queue, r.unsigned.pending, r.unsigned.sentTo = nil, nil, 0
			clear(r.unverified)
			r.mu.Unlock()
			notBefore, checked = now.Add(time.Minute), now.Add(time.Minute)
			r.log.Warn("pairing: activity not reported: the control plane says this gateway is not paired")
		default:
			notBefore = now.Add(backoff(failures, 30*time.Second))
			failures++
			r.log.Warn("pairing: activity report failed; retrying", "err", err)
		}
	}
}

var errReportNotPaired = errors.New("pairing: not paired")

// flush sends the queues in batches until they are empty or a batch
// fails: verified agents' records first, then the others to fill the
// batch. The first batch also carries the refusals counted so far;
// those counted meanwhile wait for the next flush, so a flood of them
// never keeps the reporter sending.
func (r *Reporter) flush(ctx context.Context) error {
	counts := true
	for {
		r.mu.Lock()
		signed := r.signed.next(pairwire.MaxActivityBatch)
		unsigned := r.unsigned.next(pairwire.MaxActivityBatch - len(signed))
		r.batch = append(append(r.batch[:0], signed...), unsigned...)
		unsaidSigned, unsaidUnsigned := r.signed.unsaid, r.unsigned.unsaid
		var taken map[unverifiedKind]unverifiedCount
		if counts && len(r.unverified) > 0 {
			taken = maps.Clone(r.unverified)
		}
		r.mu.Unlock()
		counts = false
		if len(r.batch) == 0 && taken == nil {
			return nil
		}
		err := r.send(ctx, r.batch, unsaidSigned+unsaidUnsigned, taken)
		if err != nil && !errors.Is(err, errReportRefused) {
			return err
		}
		r.mu.Lock()
		r.signed.sentTo += len(signed)
		r.unsigned.sentTo += len(unsigned)
		r.signed.unsaid -= unsaidSigned
		r.unsigned.unsaid -= unsaidUnsigned
		for k, c := range taken {
			// Those counted during the send are dated now: the first of
			// them came after the snapshot.
			if left := r.unverified[k].n - c.n; left > 0 {
				r.unverified[k] = unverifiedCount{at: time.Now(), n: left}
			} else {
				delete(r.unverified, k)
			}
		}
		r.mu.Unlock()
		if err == nil {
			r.sent.Add(int64(len(r.batch)))
		}
	}
}

// errReportRefused is a batch the control plane will never take (it
// answered 400): dropped, so it does not block the ones behind it.
var errReportRefused = errors.New("pairing: activity batch refused")

func (r *Reporter) send(ctx context.Context, batch []Activity, dropped int64, unverified map[unverifiedKind]unverifiedCount) error {
	r.buf = appendBatch(r.buf[:0], batch, dropped, unverified)
	b := r.buf
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
		return nil
	}
	var env struct {
		Code  string `json:"code"`
		Error string `json:"error"`
	}
	json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&env)
	switch code, _ := errcode.Parse(env.Code); {
	case code == errcode.GatewayNotPaired:
		return errReportNotPaired
	case res.StatusCode == http.StatusBadRequest:
		r.log.Error("pairing: activity batch refused by the control plane; dropped", "records", len(batch), "code", env.Code, "error", env.Error)
		return errReportRefused
	}
	return fmt.Errorf("pairing: activity report: %d %s", res.StatusCode, env.Code)
}

// appendBatch appends the JSON of a pairwire.ActivityBatch of batch:
// written by hand, since it runs for every record the gateway decides on.
func appendBatch(b []byte, batch []Activity, dropped int64, unverified map[unverifiedKind]unverifiedCount) []byte {
	b = append(b, `{"records":[`...)
	for i, a := range batch {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"at":"`...)
		b = a.At.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
		b = appendField(b, "agent_name", a.AgentName, 128)
		b = appendField(b, "agent_key", a.AgentKey, 128)
		b = appendField(b, "connection", a.Connection, 64)
		b = appendField(b, "service", a.Service, 128)
		decision := pairwire.DecisionDeny
		if a.Allowed {
			decision = pairwire.DecisionAllow
		}
		b = appendField(b, "protocol", protocolOf(a.MCP), 8)
		b = appendField(b, "method", a.Method, 32)
		b = appendField(b, "route", a.Route, 512)
		b = appendField(b, "tool", a.Tool, 128)
		b = appendField(b, "decision", decision, 8)
		b = appendField(b, "reason", a.Reason, 64)
		if a.OAuthAccount {
			// Present even when "": the connection's one account.
			b = append(b, `,"account":`...)
			b = appendString(b, a.Account, 256)
			if a.AccountNeedsReconnecting {
				b = append(b, `,"account_needs_reconnecting":true`...)
			}
		}
		b = appendField(b, "event", a.Event, 32)
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(a.Status), 10)
		us := max(a.Latency.Microseconds(), 0)
		b = append(b, `,"latency_ms":`...)
		b = strconv.AppendInt(b, us/1000, 10)
		b = append(b, '.', byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10))
		b = append(b, '}')
	}
	b = append(b, `],"dropped":`...)
	b = strconv.AppendInt(b, dropped, 10)
	if len(unverified) > 0 {
		b = append(b, `,"unverified":[`...)
		first := true
		for k, c := range unverified {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `{"at":"`...)
			b = c.at.UTC().AppendFormat(b, time.RFC3339Nano)
			b = append(b, '"')
			b = appendField(b, "protocol", protocolOf(k.mcp), 8)
			b = appendField(b, "reason", k.reason, 64)
			b = append(b, `,"count":`...)
			b = strconv.AppendInt(b, c.n, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func protocolOf(mcp bool) string {
	if mcp {
		return "mcp"
	}
	return "http"
}

// appendField appends ,"name":"v" with v as the control plane takes it
// (textcap.Clip to max bytes). Empty v appends nothing.
func appendField(b []byte, name, v string, max int) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":`...)
	return appendString(b, v, max)
}

// appendString appends v, clipped to max bytes, as a JSON string.
func appendString(b []byte, v string, max int) []byte {
	b = append(b, '"')
	v = textcap.Clip(v, max)
	for i := 0; i < len(v); i++ {
		// Clip left no control character; a byte of a multi-byte
		// character is never '"' or '\\'.
		if c := v[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, v[i])
	}
	return append(b, '"')
}
