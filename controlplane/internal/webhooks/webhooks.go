// Package webhooks sends the claim events of a service to the HTTPS
// endpoints its owner registers. Each is signed per Standard Webhooks
// (HMAC-SHA256 over id, timestamp and body).
//
// The events are not queued by this package. Triggers of the database
// schema write one outbox row per subscribed webhook, in the very
// transaction that changes a claim, whatever changed it. So an event is
// never lost between a commit and a send.
//
// A Manager serves the owner routes under /v1/services/{id}/webhooks: the
// webhooks, their recent deliveries, and a test event on request. It also
// runs the worker that empties the outbox. Each delivery is leased row by
// row, so any number of instances can share the queue and each webhook-id
// succeeds at most once. A failed attempt is retried with jittered
// exponential backoff within the retry window, until the failure
// threshold. Then it is marked failed, and the owner (and the operator
// copies) may be mailed about it.
//
// Signing secrets are sealed at rest with AES-256-GCM bound to their
// webhook. Targets go through package egress: private addresses are
// refused even through DNS rebinding, and redirects are never followed.
package webhooks

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idnhq/idn/controlplane/internal/alertmail"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/controlplane/internal/webhooks/egress"
)

// The claim lifecycle events a webhook may subscribe to, by their claim
// names.
const (
	ClaimSubmitted = "claim.submitted"
	ClaimApproved  = "claim.approved"
	ClaimRejected  = "claim.rejected"
	ClaimRevoked   = "claim.revoked"
)

// The request.* names the same events had first. They stay aliases: a
// webhook subscribed to an event by either name gets it under that name,
// so subscriptions stored before the claim names, and their receivers, go
// on as before. They are also the default subscription of a webhook
// created without events, as they always were, and the Type of the
// in-process events (controlplane.Event).
const (
	EventSubmitted = "request.submitted"
	EventApproved  = "request.approved"
	EventRejected  = "request.rejected"
	EventRevoked   = "request.revoked"
)

// ActionRequested is the event of a new action request: a call that
// waits for the owner's passkey approval. A webhook gets it only when it
// subscribed to it by name. Its data names the action and the agent,
// never the call's arguments.
const ActionRequested = "action.requested"

// ConnectionReconnectRequired is the event of an OAuth account a paired
// gateway's provider stopped accepting (invalid_grant): agents using it
// are refused until the owner connects it again. It is told once until
// the account serves a call again. A webhook gets it only when it
// subscribed to it by name; its data names the gateway, connection and
// subject, never a token.
const ConnectionReconnectRequired = "connection.reconnect_required"

// EventTest is the event type of a test delivery, sent on the owner's
// request (POST /v1/services/{id}/webhooks/{wid}/test) so a receiver can
// be checked without changing a claim. Its data carries the namespace and
// service; the claim fields are empty.
const EventTest = "webhook.test"

// events are the claim names of the events, in order; legacyEvents their
// request.* aliases, in the same order, and the default subscription.
var (
	events       = []string{ClaimSubmitted, ClaimApproved, ClaimRejected, ClaimRevoked}
	legacyEvents = []string{EventSubmitted, EventApproved, EventRejected, EventRevoked}
)

// Events returns the claim names of the events a webhook may subscribe
// to, in order (each also has its request.* alias).
func Events() []string { return slices.Clone(events) }

// eventIndex is the position of an event name, by either name, in events;
// -1 when it is neither.
func eventIndex(name string) int {
	switch name {
	case ActionRequested:
		return len(events)
	case ConnectionReconnectRequired:
		return len(events) + 1
	}
	if i := slices.Index(events, name); i >= 0 {
		return i
	}
	return slices.Index(legacyEvents, name)
}

// Config configures webhooks. The zero value turns them off.
type Config struct {
	// SecretKey is the AES-256-GCM key that encrypts webhook secrets at
	// rest (WEBHOOK_SECRET_ENCRYPTION_KEY), exactly 32 bytes. Empty means
	// webhooks are off: their routes answer 503 WEBHOOKS_DISABLED and no
	// delivery is attempted.
	SecretKey []byte
	// MaxPerService is the webhooks allowed per service
	// (MAX_WEBHOOKS_PER_SERVICE); zero means 5.
	MaxPerService int
	// RetryWindow is how long a delivery is retried
	// (WEBHOOK_RETRY_WINDOW_HOURS); zero means 24 hours.
	RetryWindow time.Duration
	// FailureThreshold is the failed attempts after which a delivery fails
	// terminally (WEBHOOK_FAILURE_THRESHOLD); zero means 10.
	FailureThreshold int
	// InsecureAllowPrivateTargets lets webhooks reach loopback, private,
	// link-local and other special-use addresses
	// (WEBHOOK_ALLOW_PRIVATE_TARGETS). False refuses them when the
	// connection is dialled.
	InsecureAllowPrivateTargets bool
	// DNSResolverURL is a DNS-over-HTTPS endpoint (RFC 8484, POST
	// application/dns-message) used to resolve webhook hosts
	// (WEBHOOK_DNS_RESOLVER_URL). Empty means the system resolver.
	DNSResolverURL string
	// Timeout bounds one delivery attempt (connect, send, response
	// headers); zero means 10 s.
	Timeout time.Duration
	// PollInterval is how often the worker looks for due work when nothing
	// wakes it; zero means 1 s.
	PollInterval time.Duration
	// Alert sends an e-mail when a delivery fails terminally; the zero
	// value sends none.
	Alert alertmail.Config
}

// AlertAddress says where the owner of namespace ns wants the alerts of
// its failing webhooks. wanted is false when the owner turned them off;
// then no alert goes out, not even the operator copies. addr is "" when
// the owner has no address or is gone; the copies still go.
type AlertAddress func(ctx context.Context, ns string) (addr string, wanted bool, err error)

// Deps is what a Manager takes from the rest of the control plane.
type Deps struct {
	// DB holds the webhooks, their outbox and the services they belong
	// to. Required.
	DB *sqldb.DB
	// Kit answers the requests and gives the clock and the logger.
	// Required.
	Kit *web.Kit
	// Owner admits the requests of a namespace owner to the routes.
	// Required.
	Owner web.Owner
	// AlertTo finds the owner's alert address; nil sends the alerts to the
	// operator copies only.
	AlertTo AlertAddress
	// Metrics receives the delivery attempts counter; nil registers it
	// nowhere.
	Metrics prometheus.Registerer
}

// Manager serves the webhook routes and delivers the outbox. It is safe
// for concurrent use.
type Manager struct {
	cfg      Config
	store    *store
	kit      *web.Kit
	owner    web.Owner
	alertTo  AlertAddress
	attempts *prometheus.CounterVec
	aead     cipher.AEAD // nil: webhooks off
	client   *http.Client
	wake     chan struct{}
}

// New validates cfg, applies its defaults and returns the Manager.
func New(cfg Config, d Deps) (*Manager, error) {
	if d.DB == nil || d.Kit == nil || d.Owner == nil {
		return nil, errors.New("webhooks: Deps.DB, Deps.Kit and Deps.Owner are required")
	}
	setDefault(&cfg.MaxPerService, 5)
	setDefault(&cfg.RetryWindow, 24*time.Hour)
	setDefault(&cfg.FailureThreshold, 10)
	setDefault(&cfg.Timeout, 10*time.Second)
	setDefault(&cfg.PollInterval, time.Second)
	if cfg.MaxPerService < 0 || cfg.RetryWindow < 0 || cfg.FailureThreshold < 0 || cfg.Timeout < 0 || cfg.PollInterval < 0 {
		return nil, errors.New("webhooks: webhook limits, durations and threshold must not be negative")
	}
	m := &Manager{cfg: cfg, store: &store{db: d.DB}, kit: d.Kit, owner: d.Owner, alertTo: d.AlertTo, wake: make(chan struct{}, 1),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_controlplane_webhook_attempts_total",
			Help: "Webhook delivery attempts by outcome: delivered, retry (failed, will be retried) or failed (failed terminally).",
		}, []string{"outcome"})}
	if len(cfg.SecretKey) != 0 {
		if len(cfg.SecretKey) != 32 {
			return nil, errors.New("webhooks: Config.SecretKey must be exactly 32 bytes (AES-256)")
		}
		block, err := aes.NewCipher(cfg.SecretKey)
		if err != nil {
			return nil, fmt.Errorf("webhooks: secret key: %w", err)
		}
		if m.aead, err = cipher.NewGCM(block); err != nil {
			return nil, fmt.Errorf("webhooks: secret key: %w", err)
		}
	}
	client, err := egress.NewClient(egress.Config{AllowPrivate: cfg.InsecureAllowPrivateTargets, ResolverURL: cfg.DNSResolverURL, Timeout: cfg.Timeout})
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	m.client = client
	if err := cfg.Alert.Validate(); err != nil {
		return nil, err
	}
	if d.Metrics != nil {
		if err := d.Metrics.Register(m.attempts); err != nil {
			return nil, fmt.Errorf("webhooks: metrics: %w", err)
		}
	}
	return m, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// On reports whether webhooks are on (Config.SecretKey is set).
func (m *Manager) On() bool { return m.aead != nil }

// newID returns prefix + 32 lower-hex characters of fresh randomness.
func newID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// sealSecret encrypts a webhook secret; the additional data binds the
// ciphertext to its webhook, so ciphertexts cannot be swapped between rows.
func (m *Manager) sealSecret(webhookID, secret string) string {
	nonce := make([]byte, m.aead.NonceSize(), m.aead.NonceSize()+len(secret)+m.aead.Overhead())
	rand.Read(nonce)
	return base64.StdEncoding.EncodeToString(m.aead.Seal(nonce, nonce, []byte(secret), secretAD(webhookID)))
}

func (m *Manager) openSecret(webhookID, sealed string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(b) < m.aead.NonceSize() {
		return "", errors.New("webhooks: webhook secret ciphertext malformed")
	}
	n := m.aead.NonceSize()
	plain, err := m.aead.Open(nil, b[:n], b[n:], secretAD(webhookID))
	if err != nil {
		return "", errors.New("webhooks: webhook secret does not decrypt (wrong key or tampered row)")
	}
	return string(plain), nil
}

func secretAD(webhookID string) []byte { return []byte("idn-webhook-secret-v1:" + webhookID) }
