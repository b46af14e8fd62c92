package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/idnhq/idn/controlplane/internal/backoff"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/controlplane/internal/webhooks/egress"
)

// Run delivers webhooks until ctx ends, then returns ctx's error: it
// looks for due deliveries every PollInterval and at once when woken
// (Wake), and prunes finished deliveries past their retention hourly. Any
// number of instances may run it against one database: deliveries are
// leased row by row, so each is attempted by one worker at a time. Run it
// once per Manager.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.PollInterval)
	defer t.Stop()
	var lastPrune time.Time
	for {
		if _, err := m.DeliverDue(ctx); err != nil && ctx.Err() == nil {
			m.kit.Log.ErrorContext(ctx, "webhook delivery pass failed", "err", err)
		}
		if now := m.kit.Now(); now.Sub(lastPrune) > time.Hour {
			lastPrune = now
			if err := m.store.pruneDeliveries(ctx, now.Add(-deliveryRetention)); err != nil && ctx.Err() == nil {
				m.kit.Log.ErrorContext(ctx, "pruning webhook deliveries failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-m.wake:
		}
	}
}

// deliveryRetention is how long finished deliveries stay listed.
const deliveryRetention = 30 * 24 * time.Hour

// Slots bounds the attempts a Manager has in flight at once, and
// SlotsPerOwner those of the services of one owner. The queue and its
// slots are shared by every owner. So an owner whose receivers are slow (or
// never answer within Timeout) holds half of the slots at most, and the
// others' deliveries go out meanwhile.
const (
	Slots         = 8
	SlotsPerOwner = Slots / 2
)

// Wake nudges Run after a change that may have queued deliveries.
func (m *Manager) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// DeliverDue makes one pass of Run: it attempts every delivery due now and
// returns how many it attempted. A slot freed by a finished attempt is
// filled at once, from the due deliveries of owners below their share.
func (m *Manager) DeliverDue(ctx context.Context) (int, error) {
	if m.aead == nil {
		return 0, nil
	}
	// The lease outlives an attempt (bounded by the client timeout) with
	// a wide margin, so it only expires for a worker that died.
	leaseFor := 2*m.cfg.Timeout + time.Minute
	var (
		wg       sync.WaitGroup
		total    int
		inflight int
		byOwner  = map[string]int{}
		finished = make(chan string, Slots) // the owner of an ended attempt
	)
	defer wg.Wait()
	ended := func(owner string) {
		inflight--
		if byOwner[owner]--; byOwner[owner] == 0 {
			delete(byOwner, owner)
		}
	}
	for {
		var batch []delivery
		token := newID("lease_")
		free := Slots - inflight
		if free > 0 && ctx.Err() == nil {
			share := make(map[string]int, len(byOwner))
			for owner, n := range byOwner {
				share[owner] = SlotsPerOwner - n
			}
			var err error
			// The poll runs every second and mostly finds nothing: its
			// statement makes no span, the deliveries' own do.
			if batch, err = m.store.claimDeliveries(sqldb.Untraced(ctx), token, free, SlotsPerOwner, share, m.kit.Now(), leaseFor); err != nil {
				return total, err
			}
		}
		for _, d := range batch {
			inflight++
			byOwner[d.Owner]++
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.deliverOne(ctx, token, d)
				finished <- d.Owner
			}()
		}
		total += len(batch)
		if inflight == 0 {
			return total, ctx.Err()
		}
		if len(batch) < free || inflight == Slots {
			// Nothing more can be leased until an attempt ends.
			ended(<-finished)
		}
		// Count the attempts that ended meanwhile.
		for drained := false; !drained; {
			select {
			case owner := <-finished:
				ended(owner)
			default:
				drained = true
			}
		}
	}
}

// deliverOne makes one attempt of a leased delivery and records it.
func (m *Manager) deliverOne(ctx context.Context, token string, d delivery) {
	url, sealed, ok, err := m.store.currentTarget(ctx, d.WebhookID)
	if err != nil || ctx.Err() != nil {
		_ = m.store.releaseLease(context.WithoutCancel(ctx), d.ID, token)
		return
	}
	if !ok { // the webhook went with its service or account: use the snapshot
		url, sealed = d.URL, d.Secret
	}
	o := attemptOutcome{At: m.kit.Now()}
	started := time.Now()
	if secret, err := m.openSecret(d.WebhookID, sealed); err != nil {
		o.Err = "webhook secret cannot be decrypted with the configured key"
		m.kit.Log.ErrorContext(ctx, "webhook secret unusable", "webhook_id", d.WebhookID, "err", err)
	} else {
		o.StatusCode, o.Err = m.send(ctx, url, secret, d)
		o.Delivered = o.Err == ""
	}
	o.Duration = time.Since(started)
	if !o.Delivered {
		o.NextAt = m.nextAttempt(d.Attempts+1, d.CreatedAt, o.At)
	}
	// The outcome is recorded even if ctx ended meanwhile: the attempt
	// happened.
	state, recorded, err := m.store.finishAttempt(context.WithoutCancel(ctx), d.ID, token, o)
	switch {
	case o.Delivered:
		m.attempts.WithLabelValues("delivered").Inc()
	case state == deliveryFailed:
		m.attempts.WithLabelValues("failed").Inc()
	default:
		m.attempts.WithLabelValues("retry").Inc()
	}
	switch {
	case err != nil:
		m.kit.Log.ErrorContext(ctx, "recording webhook attempt failed", "delivery_id", d.ID, "err", err)
	case !recorded:
		m.kit.Log.WarnContext(ctx, "webhook lease lost before the attempt was recorded", "delivery_id", d.ID)
	case state == deliveryFailed:
		m.kit.Log.WarnContext(ctx, "webhook delivery failed terminally", "delivery_id", d.ID, "webhook_id", d.WebhookID,
			"attempts", d.Attempts+1, "last_error", o.Err)
		m.alertFailure(context.WithoutCancel(ctx), d, d.Attempts+1, o)
	}
}

// actionPayload is the Standard Webhooks body of action.requested.
type actionPayload struct {
	Type      string     `json:"type"`
	Timestamp string     `json:"timestamp"`
	Data      actionData `json:"data"`
}

type actionData struct {
	ActionID  string `json:"action_id"`
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	PublicKey string `json:"public_key"`
	Subject   string `json:"subject"`
	AgentName string `json:"agent_name"`
	Status    string `json:"status"`
}

// reconnectPayload is the body of a connection.reconnect_required event.
type reconnectPayload struct {
	Type      string        `json:"type"`
	Timestamp string        `json:"timestamp"`
	Data      reconnectData `json:"data"`
}

type reconnectData struct {
	GatewayID    string `json:"gateway_id"`
	ConnectionID string `json:"connection_id"`
	Namespace    string `json:"namespace"`
	Service      string `json:"service"`
	Subject      string `json:"subject"`
	Status       string `json:"status"`
}

// payload is the Standard Webhooks body of a claim event.
type payload struct {
	Type      string      `json:"type"`
	Timestamp string      `json:"timestamp"`
	Data      payloadData `json:"data"`
}

type payloadData struct {
	ClaimID   string `json:"claim_id"`
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	PublicKey string `json:"public_key"`
	Subject   string `json:"subject"`
	AgentID   string `json:"agent_id"`
	AgentName string `json:"agent_name"`
	Status    string `json:"status"`
}

// payloadOf is the body of a delivery; it is the same bytes on every
// attempt.
func payloadOf(d delivery) []byte {
	c := d.Claim
	if d.EventType == ConnectionReconnectRequired {
		b, _ := json.Marshal(reconnectPayload{Type: d.EventType, Timestamp: web.Timestamp(d.OccurredAt), Data: reconnectData{
			GatewayID: c.PublicKey, ConnectionID: c.ID, Namespace: c.Namespace, Service: c.Service, Subject: c.Subject, Status: c.Status,
		}})
		return b
	}
	if d.EventType == ActionRequested {
		b, _ := json.Marshal(actionPayload{Type: d.EventType, Timestamp: web.Timestamp(d.OccurredAt), Data: actionData{
			ActionID: c.ID, Namespace: c.Namespace, Service: c.Service, PublicKey: c.PublicKey, Subject: c.Subject,
			AgentName: c.AgentName, Status: c.Status,
		}})
		return b
	}
	b, _ := json.Marshal(payload{Type: d.EventType, Timestamp: web.Timestamp(d.OccurredAt), Data: payloadData{
		ClaimID: c.ID, Namespace: c.Namespace, Service: c.Service, PublicKey: c.PublicKey,
		Subject: c.Subject, AgentID: c.AgentID, AgentName: c.AgentName, Status: c.Status,
	}})
	return b
}

// sign is the Standard Webhooks signature header value:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func sign(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// send POSTs the delivery and returns the response status (0 without a
// response) and a failure description ("" on success). Descriptions never
// carry the URL, which may hold secrets.
func (m *Manager) send(ctx context.Context, url, secret string, d delivery) (int, string) {
	key, err := hmacKey(secret)
	if err != nil {
		return 0, "webhook secret unusable"
	}
	body := payloadOf(d)
	ts := strconv.FormatInt(m.kit.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "webhook url unusable"
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "idn-webhooks/1")
	h.Set("webhook-id", d.ID)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", sign(key, d.ID, ts, body))
	res, err := m.client.Do(req)
	if err != nil {
		return 0, describeSendError(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return res.StatusCode, ""
	case res.StatusCode >= 300 && res.StatusCode < 400:
		return res.StatusCode, "receiver answered a redirect, which is not followed"
	default:
		return res.StatusCode, "receiver answered " + strconv.Itoa(res.StatusCode)
	}
}

// describeSendError classifies a transport error without echoing it: its
// text names the URL and the addresses it resolved to.
func describeSendError(err error) string {
	var dnsErr *net.DNSError
	var tlsErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	switch {
	case errors.Is(err, egress.ErrForbidden):
		return "refused: the target resolves to a private or special-use address"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &dnsErr) || errors.Is(err, egress.ErrResolve):
		return "host name did not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &tlsErr) || errors.As(err, &recErr):
		return "TLS handshake failed"
	default:
		return "connection failed"
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// nextAttempt returns when to retry a delivery created at created after
// its failed-th failed attempt at now (see backoff.Delay). It returns zero
// when the failure is terminal: the threshold is reached, or the retry
// would fall outside the window.
func (m *Manager) nextAttempt(failed int, created, now time.Time) time.Time {
	d := backoff.Delay(failed, m.cfg.FailureThreshold, m.cfg.RetryWindow)
	if d == 0 {
		return time.Time{}
	}
	next := now.Add(d)
	if next.After(created.Add(m.cfg.RetryWindow)) {
		return time.Time{}
	}
	return next
}
