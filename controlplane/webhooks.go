package controlplane

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/controlplane/registrywriter"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idnhq/idn/internal/apierror"
)

// WebhookConfig configures webhooks to services and registry writes.
// The zero value turns webhooks off and registry writes off.
type WebhookConfig struct {
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
	// AllowPrivateTargets lets webhooks reach loopback, private,
	// link-local and other special-use addresses
	// (WEBHOOK_ALLOW_PRIVATE_TARGETS). False refuses them when the
	// connection is dialled.
	AllowPrivateTargets bool
	// DNSResolverURL is a DNS-over-HTTPS endpoint (RFC 8484, POST
	// application/dns-message) used to resolve webhook hosts
	// (WEBHOOK_DNS_RESOLVER_URL). Empty means the system resolver.
	DNSResolverURL string
	// Timeout bounds one delivery attempt (connect, send, response
	// headers); zero means 10 s.
	Timeout time.Duration
	// PollInterval is how often RunWorkers looks for due work when nothing
	// wakes it; zero means 1 s.
	PollInterval time.Duration
	// Alert sends an e-mail when a delivery fails terminally; the zero
	// value sends none.
	Alert AlertConfig
	// Registry selects registry writes (BLOCKCHAIN_MODE) and the backend.
	Registry RegistryConfig

	rt *webhookRuntime // built by New
}

// webhookRuntime is what initWebhooks derives from the configuration.
type webhookRuntime struct {
	aead      cipher.AEAD // nil: webhooks off
	client    *http.Client
	window    time.Duration
	threshold int
	wake      chan struct{}
	registry  *registrywriter.Writer // nil: registry writes disabled
}

func (s *Server) initWebhooks() error {
	c := &s.cfg.Webhooks
	setDefault(&c.MaxPerService, 5)
	setDefault(&c.RetryWindow, 24*time.Hour)
	setDefault(&c.FailureThreshold, 10)
	setDefault(&c.Timeout, 10*time.Second)
	setDefault(&c.PollInterval, time.Second)
	if c.MaxPerService < 0 || c.RetryWindow < 0 || c.FailureThreshold < 0 || c.Timeout < 0 || c.PollInterval < 0 {
		return errors.New("controlplane: webhook limits, durations and threshold must not be negative")
	}
	rt := &webhookRuntime{window: c.RetryWindow, threshold: c.FailureThreshold, wake: make(chan struct{}, 1)}
	if len(c.SecretKey) != 0 {
		if len(c.SecretKey) != 32 {
			return errors.New("controlplane: WebhookConfig.SecretKey must be exactly 32 bytes (AES-256)")
		}
		block, err := aes.NewCipher(c.SecretKey)
		if err != nil {
			return fmt.Errorf("controlplane: webhook secret key: %w", err)
		}
		if rt.aead, err = cipher.NewGCM(block); err != nil {
			return fmt.Errorf("controlplane: webhook secret key: %w", err)
		}
	}
	var resolver *dohResolver
	if c.DNSResolverURL != "" {
		var err error
		if resolver, err = newDoHResolver(c.DNSResolverURL, c.Timeout); err != nil {
			return err
		}
	}
	guard := newTargetGuard(c.AllowPrivateTargets, resolver, c.Timeout)
	rt.client = &http.Client{
		Timeout: c.Timeout,
		Transport: &http.Transport{
			Proxy:                 nil, // a proxy would dial the target for us, past the guard
			DialContext:           guard.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          64,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   c.Timeout,
			ResponseHeaderTimeout: c.Timeout,
		},
		// Redirects are never followed: the receiver must answer itself.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if err := c.Alert.validate(); err != nil {
		return err
	}
	reg, err := registrywriter.New(c.Registry, s.store.db, s.log, s.now)
	if err != nil {
		return err
	}
	rt.registry = reg
	c.rt = rt
	return nil
}

func (s *Server) webhookRoutes(m *routeMux) {
	m.Handle("POST /v1/services/{id}/webhooks", s.sessions.Owner(s.webhooksOn(s.createWebhook)))
	m.Handle("GET /v1/services/{id}/webhooks", s.sessions.Owner(s.webhooksOn(s.listWebhooks)))
	m.Handle("GET /v1/services/{id}/webhooks/{wid}", s.sessions.Owner(s.webhooksOn(s.getWebhook)))
	m.Handle("PATCH /v1/services/{id}/webhooks/{wid}", s.sessions.Owner(s.webhooksOn(s.updateWebhook)))
	m.Handle("DELETE /v1/services/{id}/webhooks/{wid}", s.sessions.Owner(s.webhooksOn(s.deleteWebhook)))
	m.Handle("GET /v1/services/{id}/webhooks/{wid}/deliveries", s.sessions.Owner(s.webhooksOn(s.listDeliveries)))
	m.Handle("POST /v1/services/{id}/webhooks/{wid}/test", s.sessions.Owner(s.webhooksOn(s.testWebhook)))
}

type ownerHandler = func(http.ResponseWriter, *http.Request, string)

func (s *Server) webhooksOn(next ownerHandler) ownerHandler {
	return func(w http.ResponseWriter, r *http.Request, owner string) {
		if s.cfg.Webhooks.rt.aead == nil {
			apierror.Write(w, r, errWebhooksDisabled)
			return
		}
		next(w, r, owner)
	}
}

// webhookEvents are the event types a webhook may subscribe to, in order.
var webhookEvents = []string{EventSubmitted, EventApproved, EventRejected, EventRevoked}

// webhook is a webhook record. Secret is set only in the answer that
// creates it.
type webhook struct {
	ID        string    `json:"id"`
	ServiceID string    `json:"service_id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

type webhookRequest struct {
	URL    *string   `json:"url"`
	Events *[]string `json:"events"`
	Secret *string   `json:"secret"`
}

// checkEvents validates a subscription list: a non-empty subset of the
// four event types without repeats.
func checkEvents(in []string) *apierror.Error {
	if len(in) == 0 {
		return web.Validation("events must list at least one of %s", strings.Join(webhookEvents, ", "))
	}
	seen := map[string]bool{}
	for _, e := range in {
		known := false
		for _, k := range webhookEvents {
			known = known || e == k
		}
		if !known || seen[e] {
			return web.Validation("events must list distinct values of %s", strings.Join(webhookEvents, ", "))
		}
		seen[e] = true
	}
	return nil
}

func (s *Server) checkURL(u string) *apierror.Error {
	err := validateWebhookURL(u, s.cfg.Webhooks.AllowPrivateTargets)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errForbiddenTarget):
		return errWebhookURL
	default:
		return web.Validation("%s", err.Error())
	}
}

const secretPrefix = "whsec_"

// webhookKey returns the HMAC key of a Standard Webhooks secret: the
// base64 part after the optional whsec_ prefix, at least 32 bytes.
func webhookKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil || len(key) < 32 || len(key) > 64 {
		return nil, errors.New("secret must be whsec_ followed by the standard base64 of 32 to 64 random bytes")
	}
	return key, nil
}

func newWebhookSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return secretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// sealSecret encrypts a webhook secret; the additional data binds the
// ciphertext to its webhook, so ciphertexts cannot be swapped between rows.
func (rt *webhookRuntime) sealSecret(webhookID, secret string) string {
	nonce := make([]byte, rt.aead.NonceSize(), rt.aead.NonceSize()+len(secret)+rt.aead.Overhead())
	rand.Read(nonce)
	return base64.StdEncoding.EncodeToString(rt.aead.Seal(nonce, nonce, []byte(secret), secretAD(webhookID)))
}

func (rt *webhookRuntime) openSecret(webhookID, sealed string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(b) < rt.aead.NonceSize() {
		return "", errors.New("controlplane: webhook secret ciphertext malformed")
	}
	n := rt.aead.NonceSize()
	plain, err := rt.aead.Open(nil, b[:n], b[n:], secretAD(webhookID))
	if err != nil {
		return "", errors.New("controlplane: webhook secret does not decrypt (wrong key or tampered row)")
	}
	return string(plain), nil
}

func secretAD(webhookID string) []byte { return []byte("idn-webhook-secret-v1:" + webhookID) }

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, owner string) {
	var in webhookRequest
	if e := s.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if in.URL == nil {
		apierror.Write(w, r, web.Validation("url is required"))
		return
	}
	if e := s.checkURL(*in.URL); e != nil {
		apierror.Write(w, r, e)
		return
	}
	events := webhookEvents
	if in.Events != nil {
		if e := checkEvents(*in.Events); e != nil {
			apierror.Write(w, r, e)
			return
		}
		events = *in.Events
	}
	secret := newWebhookSecret()
	if in.Secret != nil {
		if _, err := webhookKey(*in.Secret); err != nil {
			apierror.Write(w, r, web.Validation("%s", err.Error()))
			return
		}
		secret = *in.Secret
		if !strings.HasPrefix(secret, secretPrefix) {
			secret = secretPrefix + secret
		}
	}
	rt := s.cfg.Webhooks.rt
	wh := webhook{ID: newID("whk_"), ServiceID: r.PathValue("id"), URL: *in.URL, Events: events}
	wh, err := s.store.createWebhook(r.Context(), owner, wh, rt.sealSecret(wh.ID, secret), s.cfg.Webhooks.MaxPerService, s.now())
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	wh.Secret = secret
	apierror.WriteJSON(w, http.StatusCreated, wh)
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request, owner string) {
	list, err := s.store.listWebhooks(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"webhooks": list})
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request, owner string) {
	wh, err := s.store.webhook(r.Context(), owner, r.PathValue("id"), r.PathValue("wid"))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, wh)
}

// updateWebhook changes url and/or events. Deliveries already queued go to
// the webhook's current URL.
func (s *Server) updateWebhook(w http.ResponseWriter, r *http.Request, owner string) {
	var in webhookRequest
	if e := s.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if in.Secret != nil {
		apierror.Write(w, r, web.Validation("secret cannot be changed; create a new webhook to rotate it"))
		return
	}
	if in.URL == nil && in.Events == nil {
		apierror.Write(w, r, web.Validation("nothing to update: give url and/or events"))
		return
	}
	if in.URL != nil {
		if e := s.checkURL(*in.URL); e != nil {
			apierror.Write(w, r, e)
			return
		}
	}
	if in.Events != nil {
		if e := checkEvents(*in.Events); e != nil {
			apierror.Write(w, r, e)
			return
		}
	}
	wh, err := s.store.updateWebhook(r.Context(), owner, r.PathValue("id"), r.PathValue("wid"), in.URL, in.Events, s.now())
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, wh)
}

// deleteWebhook removes a webhook and cancels its queued deliveries.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request, owner string) {
	if err := s.store.deleteWebhook(r.Context(), owner, r.PathValue("id"), r.PathValue("wid"), s.now()); err != nil {
		s.writeErr(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listDeliveries is GET …/webhooks/{wid}/deliveries?limit: the most recent
// deliveries, newest first, each with its attempts.
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request, owner string) {
	limit := 20
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			apierror.Write(w, r, web.Validation("limit must be an integer from 1 to 100"))
			return
		}
		limit = n
	}
	list, err := s.store.listDeliveries(r.Context(), owner, r.PathValue("id"), r.PathValue("wid"), limit)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"deliveries": list})
}
