package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/controlplane/internal/webhooks/egress"
	"github.com/idnhq/idn/errcode"
)

// Errors of the store, answered by errorRules.
var (
	errServiceNotFound = errors.New("webhooks: service not found")
	errWebhookNotFound = errors.New("webhooks: webhook not found")
	errWebhookLimit    = errors.New("webhooks: webhook limit reached")
)

// errorRules answers the store's errors at the handlers.
var errorRules = web.Rules{
	web.When(web.Is(errServiceNotFound), web.Code(errcode.ServiceNotFound)),
	web.When(web.Is(errWebhookNotFound), web.Code(errcode.WebhookNotFound)),
	web.When(web.Is(errWebhookLimit), web.Code(errcode.WebhookLimitReached)),
}

// Answers of the handlers themselves.
var (
	errWebhooksDisabled = apierror.Coded(errcode.WebhooksDisabled, "")
	errWebhookURL       = apierror.Coded(errcode.WebhookURLForbidden, "")
)

// error answers err through errorRules and the kit.
func (m *Manager) error(w http.ResponseWriter, r *http.Request, err error) {
	m.kit.Error(w, r, errorRules.Answer(err))
}

// Routes registers the owner routes of webhooks on mux.
func (m *Manager) Routes(mux web.Mux) {
	mux.Handle("POST /v1/services/{id}/webhooks", m.owner(m.on(m.createWebhook)))
	mux.Handle("GET /v1/services/{id}/webhooks", m.owner(m.on(m.listWebhooks)))
	mux.Handle("GET /v1/services/{id}/webhooks/{wid}", m.owner(m.on(m.getWebhook)))
	mux.Handle("PATCH /v1/services/{id}/webhooks/{wid}", m.owner(m.on(m.updateWebhook)))
	mux.Handle("DELETE /v1/services/{id}/webhooks/{wid}", m.owner(m.on(m.deleteWebhook)))
	mux.Handle("GET /v1/services/{id}/webhooks/{wid}/deliveries", m.owner(m.on(m.listDeliveries)))
	mux.Handle("POST /v1/services/{id}/webhooks/{wid}/test", m.owner(m.on(m.testWebhook)))
}

// on answers 503 WEBHOOKS_DISABLED while webhooks are off.
func (m *Manager) on(next web.OwnerHandler) web.OwnerHandler {
	return func(w http.ResponseWriter, r *http.Request, owner string) {
		if m.aead == nil {
			apierror.Write(w, r, errWebhooksDisabled)
			return
		}
		next(w, r, owner)
	}
}

// Webhook is a webhook as its owner sees it. Secret is set only in the
// answer that creates it.
type Webhook struct {
	ID        string    `json:"id"`
	ServiceID string    `json:"service_id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

type request struct {
	URL    *string   `json:"url"`
	Events *[]string `json:"events"`
	Secret *string   `json:"secret"`
}

// checkEvents validates a subscription list: a non-empty subset of the
// four events, each by its claim name or its request.* alias, none twice
// (by either name).
func checkEvents(in []string) *apierror.Error {
	if len(in) == 0 {
		return web.Validation("events must list at least one of %s (or their aliases %s), %s or %s", strings.Join(events, ", "), strings.Join(legacyEvents, ", "), ActionRequested, ConnectionReconnectRequired)
	}
	seen := map[int]bool{}
	for _, e := range in {
		i := eventIndex(e)
		if i < 0 || seen[i] {
			return web.Validation("events must list distinct events of %s (or their aliases %s), %s or %s, each once", strings.Join(events, ", "), strings.Join(legacyEvents, ", "), ActionRequested, ConnectionReconnectRequired)
		}
		seen[i] = true
	}
	return nil
}

func (m *Manager) checkURL(u string) *apierror.Error {
	err := egress.CheckURL(u, m.cfg.InsecureAllowPrivateTargets)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, egress.ErrForbidden):
		return errWebhookURL
	default:
		return web.Validation("%s", err.Error())
	}
}

const secretPrefix = "whsec_"

// hmacKey returns the HMAC key of a Standard Webhooks secret: the
// base64 part after the optional whsec_ prefix, at least 32 bytes.
func hmacKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil || len(key) < 32 || len(key) > 64 {
		return nil, errors.New("secret must be whsec_ followed by the standard base64 of 32 to 64 random bytes")
	}
	return key, nil
}

// newSecret is a fresh Standard Webhooks secret.
func newSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return secretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

func (m *Manager) createWebhook(w http.ResponseWriter, r *http.Request, owner string) {
	var in request
	if e := m.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if in.URL == nil {
		apierror.Write(w, r, web.Validation("url is required"))
		return
	}
	if e := m.checkURL(*in.URL); e != nil {
		apierror.Write(w, r, e)
		return
	}
	subscribed := legacyEvents
	if in.Events != nil {
		if e := checkEvents(*in.Events); e != nil {
			apierror.Write(w, r, e)
			return
		}
		subscribed = *in.Events
	}
	secret := newSecret()
	if in.Secret != nil {
		if _, err := hmacKey(*in.Secret); err != nil {
			apierror.Write(w, r, web.Validation("%s", err.Error()))
			return
		}
		secret = *in.Secret
		if !strings.HasPrefix(secret, secretPrefix) {
			secret = secretPrefix + secret
		}
	}
	wh := Webhook{ID: newID("whk_"), ServiceID: r.PathValue("id"), URL: *in.URL, Events: subscribed}
	wh, err := m.store.createWebhook(r.Context(), owner, wh, m.sealSecret(wh.ID, secret), m.cfg.MaxPerService, m.kit.Now())
	if err != nil {
		m.error(w, r, err)
		return
	}
	wh.Secret = secret
	apierror.WriteJSON(w, http.StatusCreated, wh)
}

func (m *Manager) listWebhooks(w http.ResponseWriter, r *http.Request, owner string) {
	list, err := m.store.listWebhooks(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		m.error(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"webhooks": list})
}

func (m *Manager) getWebhook(w http.ResponseWriter, r *http.Request, owner string) {
	wh, err := m.store.webhook(r.Context(), owner, r.PathValue("id"), r.PathValue("wid"))
	if err != nil {
		m.error(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, wh)
}

// updateWebhook changes url and/or events. Deliveries already queued go to
// the webhook's current URL.
func (m *Manager) updateWebhook(w http.ResponseWriter, r *http.Request, owner string) {
	var in request
	if e := m.kit.Decode(w, r, &in); e != nil {
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
		if e := m.checkURL(*in.URL); e != nil {
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
	wh, err := m.store.updateWebhook(r.Context(), owner, r.PathValue("id"), r.PathValue("wid"), in.URL, in.Events, m.kit.Now())
	if err != nil {
		m.error(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, wh)
}

// deleteWebhook removes a webhook and cancels its queued deliveries.
func (m *Manager) deleteWebhook(w http.ResponseWriter, r *http.Request, owner string) {
	if err := m.store.deleteWebhook(r.Context(), owner, r.PathValue("id"), r.PathValue("wid"), m.kit.Now()); err != nil {
		m.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listDeliveries is GET …/webhooks/{wid}/deliveries?limit: the most recent
// deliveries, newest first, each with its attempts.
func (m *Manager) listDeliveries(w http.ResponseWriter, r *http.Request, owner string) {
	limit := 20
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			apierror.Write(w, r, web.Validation("limit must be an integer from 1 to 100"))
			return
		}
		limit = n
	}
	list, err := m.store.listDeliveries(r.Context(), owner, r.PathValue("id"), r.PathValue("wid"), limit)
	if err != nil {
		m.error(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"deliveries": list})
}

// List returns the webhooks of owner's service serviceID, oldest first.
func (m *Manager) List(ctx context.Context, owner, serviceID string) ([]Webhook, error) {
	return m.store.listWebhooks(ctx, owner, serviceID)
}

// Deliveries returns the newest limit deliveries of webhook wid of owner's
// service serviceID, each with its attempts.
func (m *Manager) Deliveries(ctx context.Context, owner, serviceID, wid string, limit int) ([]Delivery, error) {
	return m.store.listDeliveries(ctx, owner, serviceID, wid, limit)
}
