package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/idnhq/idn/controlplane"
)

// receiver is the demo's webhook endpoint. It checks each delivery's
// Standard Webhooks signature with the webhook's secret and passes the
// event types it accepted on; it never writes to the output itself, which
// the demo's steps own.
type receiver struct {
	mu     sync.Mutex
	secret []byte
	events chan string
}

func newReceiver() *receiver { return &receiver{events: make(chan string, 64)} }

// setSecret takes the webhook's whsec_ secret.
func (rc *receiver) setSecret(whsec string) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(whsec, "whsec_"))
	if err != nil {
		return fmt.Errorf("webhook secret: %w", err)
	}
	rc.mu.Lock()
	rc.secret = key
	rc.mu.Unlock()
	return nil
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	mac := hmac.New(sha256.New, rc.secret)
	rc.mu.Unlock()
	fmt.Fprintf(mac, "%s.%s.%s", r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), body)
	want := mac.Sum(nil)
	ok := false
	for _, sig := range strings.Fields(r.Header.Get("webhook-signature")) {
		v, b64, _ := strings.Cut(sig, ",")
		got, err := base64.StdEncoding.DecodeString(b64)
		ok = ok || v == "v1" && err == nil && hmac.Equal(got, want)
	}
	var p struct {
		Type string `json:"type"`
	}
	if !ok || json.Unmarshal(body, &p) != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	select {
	case rc.events <- p.Type:
	default: // nobody is waiting for more
	}
	w.WriteHeader(http.StatusNoContent)
}

// wait returns once the receiver has accepted every event of want, in any
// order among others.
func (rc *receiver) wait(ctx context.Context, want ...string) error {
	missing := map[string]bool{}
	for _, w := range want {
		missing[w] = true
	}
	for len(missing) > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhook deliveries still missing %v: %w", missing, ctx.Err())
		case ev := <-rc.events:
			delete(missing, ev)
		}
	}
	return nil
}

// addWebhook subscribes url to the claim events of the demo service, as
// the owner would on the service page, and returns the webhook's secret.
func (d *demo) addWebhook(ctx context.Context, cookie, url string) (string, error) {
	headers := map[string]string{"Cookie": cookie}
	var list struct {
		Services []struct{ ID, Slug string } `json:"services"`
	}
	if err := d.sendJSON(ctx, http.MethodGet, d.cpURL+"/v1/services", headers, nil, &list); err != nil {
		return "", err
	}
	var id string
	for _, s := range list.Services {
		if s.Slug == serviceSlug {
			id = s.ID
		}
	}
	var created struct {
		Secret string `json:"secret"`
	}
	err := d.sendJSON(ctx, http.MethodPost, d.cpURL+"/v1/services/"+id+"/webhooks", headers, map[string]any{"url": url,
		"events": []string{controlplane.ClaimSubmitted, controlplane.ClaimApproved, controlplane.ClaimRejected, controlplane.ClaimRevoked}}, &created)
	return created.Secret, err
}
