package actions

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
)

// KeysUpdateTTL is how long the owner has to sign a key-set change.
const KeysUpdateTTL = 5 * time.Minute

// errNoGateway refuses a key-set change when no gateway is paired: a
// gateway paired later pins the passkeys registered then.
var errNoGateway = apierror.Coded(errcode.ValidationError, "no gateway is paired; a gateway pins the owner's passkeys when it is paired")

// errKeysChanged refuses an update whose set or version is not the one
// the control plane would now ask for (a passkey changed meanwhile, or
// another update landed first).
var errKeysChanged = apierror.Coded(errcode.ValidationError, "the owner's passkeys changed since this update was prepared; ask for a new challenge")

// Pinned returns the owner's passkeys as a gateway paired now pins them,
// at the version of the owner's latest key-set change, and that change
// (nil when none).
func (a *Actions) Pinned(ctx context.Context, ns string) (*approval.Keys, json.RawMessage, error) {
	keys, err := a.deps.Keys(ctx, ns)
	if err != nil {
		return nil, nil, err
	}
	last, raw, err := a.lastKeysUpdate(ctx, ns)
	if err != nil {
		return nil, nil, err
	}
	if last != nil {
		keys.Version = last.Keys.Version
	}
	return keys, raw, nil
}

func (a *Actions) lastKeysUpdate(ctx context.Context, ns string) (*approval.KeysUpdate, json.RawMessage, error) {
	var body string
	err := a.deps.DB.QueryRowContext(ctx, `SELECT body FROM owner_key_updates WHERE namespace = $1`, ns).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, sqldb.Err("read owner key update", err)
	}
	var u approval.KeysUpdate
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		return nil, nil, err
	}
	return &u, json.RawMessage(body), nil
}

// keysBase is the set an update must be signed against: the latest
// change's, or with none the passkeys registered when the first of
// gateways paired, which every gateway pinned. Each gateway checks again
// against what it pinned.
func (a *Actions) keysBase(ctx context.Context, ns string, gateways []PairedGateway) (*approval.Keys, error) {
	last, _, err := a.lastKeysUpdate(ctx, ns)
	if err != nil {
		return nil, err
	}
	if last != nil {
		return &last.Keys, nil
	}
	first := time.Time{}
	for _, g := range gateways {
		if first.IsZero() || g.PairedAt.Before(first) {
			first = g.PairedAt
		}
	}
	if first.IsZero() {
		return nil, errNoGateway
	}
	return a.deps.KeysAt(ctx, ns, first)
}

// keysChallenge prepares the change of the owner's current passkeys for
// every paired gateway and gives the challenge to sign with a passkey of
// the base set.
func (a *Actions) keysChallenge(w http.ResponseWriter, r *http.Request, ns string) {
	ctx := r.Context()
	next, _, err := a.Pinned(ctx, ns)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	next.Version++
	gateways, err := a.deps.Gateways(ctx, ns)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	base, err := a.keysBase(ctx, ns, gateways)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ids := make([]string, 0, len(gateways))
	for _, g := range gateways {
		ids = append(ids, g.ID)
	}
	u := approval.KeysUpdate{Keys: *next, Gateways: ids, ExpiresAt: a.kit.Now().Add(KeysUpdateTTL).UTC().Truncate(time.Second)}
	creds := make([]string, 0, len(base.Keys))
	for _, k := range base.Keys {
		creds = append(creds, base64.RawURLEncoding.EncodeToString(k.CredentialID))
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{
		"update":            u,
		"challenge":         base64.RawURLEncoding.EncodeToString(approval.KeysChallenge(&u)),
		"rp_id":             base.RPID,
		"credential_ids":    creds,
		"user_verification": "required",
	})
}

// gatewayResult is what one gateway made of a key-set change.
type gatewayResult struct {
	GatewayID string `json:"gateway_id"`
	// Status: "applied"; "refused" (it keeps its pinned keys); "offline"
	// or "unconfirmed" (no answer): it gets the change when it reconnects.
	Status string `json:"status"`
}

// updateKeys checks the owner's signed change against the base set,
// stores it and sends it to each gateway it names.
func (a *Actions) updateKeys(w http.ResponseWriter, r *http.Request, ns string) {
	var body struct {
		Update *approval.KeysUpdate `json:"update"`
	}
	if ae := a.kit.Decode(w, r, &body); ae != nil {
		apierror.Write(w, r, ae)
		return
	}
	u := body.Update
	if u == nil || u.Assertion == nil || len(u.Gateways) == 0 {
		apierror.Write(w, r, web.Validation("update with keys, gateways, expires_at and assertion is required"))
		return
	}
	ctx := r.Context()
	want, _, err := a.Pinned(ctx, ns)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	want.Version++
	if approval.KeysDigest(want) != approval.KeysDigest(&u.Keys) {
		apierror.Write(w, r, errKeysChanged)
		return
	}
	gateways, err := a.deps.Gateways(ctx, ns)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	base, err := a.keysBase(ctx, ns, gateways)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if _, err := base.Apply(u, u.Gateways[0], a.kit.Now()); err != nil {
		a.fail(w, r, err)
		return
	}
	raw, err := json.Marshal(u)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	stored, err := a.storeKeysUpdate(ctx, ns, u.Keys.Version, raw)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !stored {
		apierror.Write(w, r, errKeysChanged)
		return
	}
	results := make([]gatewayResult, 0, len(u.Gateways))
	for _, id := range u.Gateways {
		results = append(results, gatewayResult{GatewayID: id, Status: a.sendKeys(ctx, ns, id, raw)})
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"version": u.Keys.Version, "gateways": results})
}

// storeKeysUpdate keeps u as ns's latest change unless a change of the
// same or a higher version is there.
func (a *Actions) storeKeysUpdate(ctx context.Context, ns string, version int64, raw json.RawMessage) (bool, error) {
	res, err := a.deps.DB.Exec(ctx, `INSERT INTO owner_key_updates (namespace, version, body, created_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (namespace) DO UPDATE SET version = excluded.version, body = excluded.body, created_at = excluded.created_at
		WHERE owner_key_updates.version < excluded.version`, ns, version, string(raw), sqldb.Micros(a.kit.Now()))
	if err != nil {
		return false, sqldb.Err("store owner key update", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// sendKeys brings a stored change to gateway id over its link and
// reports what the gateway made of it.
func (a *Actions) sendKeys(ctx context.Context, ns, id string, raw json.RawMessage) string {
	answer, err := a.deps.Send(ctx, ns, id, raw)
	if a.deps.IsOffline(err) {
		return "offline"
	}
	if err != nil {
		a.kit.Log.WarnContext(ctx, "owner key-set update not delivered", "gateway", id, "err", err)
		return "unconfirmed"
	}
	var res struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(answer, &res) != nil || len(res.Error) > 0 {
		return "refused"
	}
	return "applied"
}
