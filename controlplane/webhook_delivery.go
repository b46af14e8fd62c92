package controlplane

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/web"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// RunWorkers delivers webhooks and registry writes until ctx ends, then
// returns ctx's error. Each kind of work has its own loop, so a slow
// registry never holds up webhooks; both poll the database every
// PollInterval and are woken at once by claim changes made through this
// Server. Any number of instances may run it against one database:
// deliveries and registry jobs are leased row by row, so each is attempted
// by one worker at a time. Run it once per Server.
func (s *Server) RunWorkers(ctx context.Context) error {
	rt := s.cfg.Webhooks.rt
	var wg sync.WaitGroup
	if rt.registry != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.loop(ctx, rt.registry.Wake(), func() {
				if err := rt.registry.RunDue(ctx); err != nil && ctx.Err() == nil {
					s.log.ErrorContext(ctx, "registry pass failed", "err", err)
				}
			})
		}()
	}
	var lastPrune time.Time
	s.loop(ctx, rt.wake, func() {
		if _, err := s.deliverDue(ctx); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "webhook delivery pass failed", "err", err)
		}
		if now := s.now(); now.Sub(lastPrune) > time.Hour {
			lastPrune = now
			if err := s.store.pruneDeliveries(ctx, now.Add(-deliveryRetention)); err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "pruning webhook deliveries failed", "err", err)
			}
		}
	})
	wg.Wait()
	return ctx.Err()
}

// loop runs pass now, then after every PollInterval or wake-up, until ctx
// ends.
func (s *Server) loop(ctx context.Context, wake <-chan struct{}, pass func()) {
	t := time.NewTicker(s.cfg.Webhooks.PollInterval)
	defer t.Stop()
	for {
		pass()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

// deliveryRetention is how long finished deliveries stay listed.
const deliveryRetention = 30 * 24 * time.Hour

// deliveryParallelism bounds the attempts in flight at once, and
// deliveryPerOwner those of the services of one owner: the queue and its
// slots are shared by every owner, so one whose receivers are slow (or
// never answer within Timeout) holds half of the slots at most, and the
// others' deliveries go out meanwhile.
const (
	deliveryParallelism = 8
	deliveryPerOwner    = deliveryParallelism / 2
)

// wakeWorkers nudges RunWorkers after a change that may have queued work.
func (s *Server) wakeWorkers() {
	select {
	case s.cfg.Webhooks.rt.wake <- struct{}{}:
	default:
	}
}

// deliverDue attempts every delivery due now and returns how many it
// attempted. A slot freed by a finished attempt is filled at once, from
// the due deliveries of owners below their share.
func (s *Server) deliverDue(ctx context.Context) (int, error) {
	rt := s.cfg.Webhooks.rt
	if rt.aead == nil {
		return 0, nil
	}
	// The lease outlives an attempt (bounded by the client timeout) with
	// a wide margin, so it only expires for a worker that died.
	leaseFor := 2*s.cfg.Webhooks.Timeout + time.Minute
	var (
		wg       sync.WaitGroup
		total    int
		inflight int
		byOwner  = map[string]int{}
		finished = make(chan string, deliveryParallelism) // the owner of an ended attempt
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
		free := deliveryParallelism - inflight
		if free > 0 && ctx.Err() == nil {
			share := make(map[string]int, len(byOwner))
			for owner, n := range byOwner {
				share[owner] = deliveryPerOwner - n
			}
			var err error
			if batch, err = s.store.claimDeliveries(ctx, token, free, deliveryPerOwner, share, s.now(), leaseFor); err != nil {
				return total, err
			}
		}
		for _, d := range batch {
			inflight++
			byOwner[d.Owner]++
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.deliverOne(ctx, token, d)
				finished <- d.Owner
			}()
		}
		total += len(batch)
		if inflight == 0 {
			return total, ctx.Err()
		}
		if len(batch) < free || inflight == deliveryParallelism {
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
func (s *Server) deliverOne(ctx context.Context, token string, d delivery) {
	rt := s.cfg.Webhooks.rt
	url, sealed, ok, err := s.store.currentTarget(ctx, d.WebhookID)
	if err != nil || ctx.Err() != nil {
		_ = s.store.releaseLease(context.WithoutCancel(ctx), d.ID, token)
		return
	}
	if !ok { // the webhook went with its service or account: use the snapshot
		url, sealed = d.URL, d.Secret
	}
	o := attemptOutcome{At: s.now()}
	started := time.Now()
	if secret, err := rt.openSecret(d.WebhookID, sealed); err != nil {
		o.Err = "webhook secret cannot be decrypted with the configured key"
		s.log.ErrorContext(ctx, "webhook secret unusable", "webhook_id", d.WebhookID, "err", err)
	} else {
		o.StatusCode, o.Err = s.send(ctx, url, secret, d)
		o.Delivered = o.Err == ""
	}
	o.Duration = time.Since(started)
	if !o.Delivered {
		o.NextAt = rt.nextAttempt(d.Attempts+1, d.CreatedAt, o.At)
	}
	// The outcome is recorded even if ctx ended meanwhile: the attempt
	// happened.
	state, recorded, err := s.store.finishAttempt(context.WithoutCancel(ctx), d.ID, token, o)
	switch {
	case o.Delivered:
		s.obs.webhooks.WithLabelValues("delivered").Inc()
	case state == deliveryFailed:
		s.obs.webhooks.WithLabelValues("failed").Inc()
	default:
		s.obs.webhooks.WithLabelValues("retry").Inc()
	}
	switch {
	case err != nil:
		s.log.ErrorContext(ctx, "recording webhook attempt failed", "delivery_id", d.ID, "err", err)
	case !recorded:
		s.log.WarnContext(ctx, "webhook lease lost before the attempt was recorded", "delivery_id", d.ID)
	case state == deliveryFailed:
		s.log.WarnContext(ctx, "webhook delivery failed terminally", "delivery_id", d.ID, "webhook_id", d.WebhookID,
			"attempts", d.Attempts+1, "last_error", o.Err)
		s.alertFailure(context.WithoutCancel(ctx), d, d.Attempts+1, o)
	}
}

// webhookPayload is the Standard Webhooks body of a claim event.
type webhookPayload struct {
	Type      string      `json:"type"`
	Timestamp string      `json:"timestamp"`
	Data      webhookData `json:"data"`
}

type webhookData struct {
	ClaimID   string `json:"claim_id"`
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	PublicKey string `json:"public_key"`
	Subject   string `json:"subject"`
	AgentID   string `json:"agent_id"`
	AgentName string `json:"agent_name"`
	Status    string `json:"status"`
}

// webhookBody is the body of a delivery; it is the same bytes on every
// attempt.
func webhookBody(d delivery) []byte {
	c := d.Claim
	b, _ := json.Marshal(webhookPayload{Type: d.EventType, Timestamp: web.Timestamp(d.OccurredAt), Data: webhookData{
		ClaimID: c.ID, Namespace: c.Namespace, Service: c.Service, PublicKey: c.PublicKey,
		Subject: c.Subject, AgentID: c.AgentID, AgentName: c.AgentName, Status: c.Status,
	}})
	return b
}

// signWebhook is the Standard Webhooks signature header value:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func signWebhook(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// send POSTs the delivery and returns the response status (0 without a
// response) and a failure description ("" on success). Descriptions never
// carry the URL, which may hold secrets.
func (s *Server) send(ctx context.Context, url, secret string, d delivery) (int, string) {
	key, err := webhookKey(secret)
	if err != nil {
		return 0, "webhook secret unusable"
	}
	body := webhookBody(d)
	ts := strconv.FormatInt(s.now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "webhook url unusable"
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "idn-webhooks/1")
	h.Set("webhook-id", d.ID)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", signWebhook(key, d.ID, ts, body))
	res, err := s.cfg.Webhooks.rt.client.Do(req)
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
	case errors.Is(err, errForbiddenTarget):
		return "refused: the target resolves to a private or special-use address"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &dnsErr) || errors.Is(err, errResolve):
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
// its failed-th failed attempt at now, or zero when the failure is
// terminal (threshold reached, or the retry would fall outside the
// window). Delays double from a base chosen so that the threshold's
// attempts span the window; each delay is drawn from its upper half
// ("equal jitter"), so delays still never shrink.
func (rt *webhookRuntime) nextAttempt(failed int, created, now time.Time) time.Time {
	d := backoffDelay(failed, rt.threshold, rt.window)
	if d == 0 {
		return time.Time{}
	}
	next := now.Add(d)
	if next.After(created.Add(rt.window)) {
		return time.Time{}
	}
	return next
}

// backoffDelay is the jittered delay after the failed-th failure, zero
// when no attempt should follow.
func backoffDelay(failed, threshold int, window time.Duration) time.Duration {
	if failed >= threshold || failed < 1 {
		return 0
	}
	base := float64(window) / (math.Exp2(float64(threshold-1)) - 1)
	base = math.Max(base, float64(time.Second))
	d := math.Min(base*math.Exp2(float64(failed-1)), float64(window))
	return time.Duration(d/2 + rand.Float64()*d/2)
}
