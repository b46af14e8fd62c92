package credvault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/approval"
)

// Sentinel errors. Callers branch on them with errors.Is; the gateway's
// admin API and proxy map them to codes (the status each names is theirs).
var (
	// ErrNotFound: no connection with that id (404 CONNECTION_NOT_FOUND).
	ErrNotFound = errors.New("credvault: connection not found")
	// ErrVariableNotFound: no credential variable with that key (404
	// VARIABLE_NOT_FOUND).
	ErrVariableNotFound = errors.New("credvault: credential variable not found")
	// ErrExists: a connection with that id already exists (409
	// CONNECTION_EXISTS).
	ErrExists = errors.New("credvault: connection already exists")
	// ErrVariableInUse: the variable is still referenced; see
	// VariableInUseError for which connections reference it (409
	// VARIABLE_IN_USE).
	ErrVariableInUse = errors.New("credvault: credential variable is in use")
	// ErrCredentialUnresolved: a connection's credential cannot be produced
	// (a {{KEY}} names a missing variable, or the sealed secret does not
	// open). The gateway answers 500 CREDENTIAL_UNRESOLVED.
	ErrCredentialUnresolved = errors.New("credvault: credential unresolved")
	// ErrWrongMasterKey: the store was created under another master key.
	ErrWrongMasterKey = errors.New("credvault: the master key does not match this store (it was created with a different GATEWAY_MASTER_KEY)")
)

// VariableInUseError is returned by DeleteVariable for a variable that
// connections still reference. It matches ErrVariableInUse.
type VariableInUseError struct {
	Key         string
	Connections []string // ids, sorted
}

func (e *VariableInUseError) Error() string {
	return fmt.Sprintf("credvault: credential variable %s is referenced by connection(s) %s", e.Key, strings.Join(e.Connections, ", "))
}

// Is makes errors.Is(err, ErrVariableInUse) true.
func (e *VariableInUseError) Is(target error) bool { return target == ErrVariableInUse }

// DefaultPollInterval is how often a Vault checks the store for commits by
// other processes when Config.PollInterval is zero.
const DefaultPollInterval = 250 * time.Millisecond

const keyCheckPlaintext = "idn-credvault key check v1"

// Config configures a Vault.
type Config struct {
	// Store holds the records. Required. The Vault does not close it.
	Store Store
	// MasterKey seals and opens every secret. Required: the zero value is
	// refused.
	MasterKey MasterKey
	// Logger receives operational messages (never secrets). Nil discards.
	Logger *slog.Logger
	// PollInterval is how often Store.Generation is polled to pick up
	// commits made by other processes; a Store that is a Notifier also
	// wakes the Vault at once. Zero means DefaultPollInterval; a negative
	// value disables both (one-shot tools such as the CLI).
	PollInterval time.Duration
	// Clock returns the current time for record timestamps and rotation
	// due dates. Nil means time.Now.
	Clock func() time.Time
	// Extensions gives meaning to the connections' extensions. Its zero
	// value refuses every write of a connection that has any.
	Extensions Extensions
	// OnChange is called after each rebuild of the snapshot: a write
	// through this Vault, or one by another process once noticed. It
	// runs on the writer's or the poller's goroutine, so it must not
	// block. Nil means none.
	OnChange func()
}

// Extensions are the hooks of the package that owns the connections'
// extensions (see Connection.Extensions).
type Extensions struct {
	// Check completes and checks the extensions of every connection about
	// to be stored, after its own defaults, changing c.Extensions in
	// place; an error refuses the write (a *ValidationError names the
	// member). Nil refuses any connection with extensions.
	Check func(c *Connection) error
	// SecretRoute names the extensions that decide where the credential
	// is sent (Vault.SecretRouteChanges compares them).
	SecretRoute []string
	// Destinations returns, for a connection, the URLs besides base_url
	// whose scheme and host may receive its credential (an MCP
	// connection's absolute endpoint). Nil means none.
	Destinations func(c *Connection) []string
}

// Vault is the credential store's API: writes go through the Store in
// transactions; reads come from an immutable in-memory snapshot. A Vault is
// safe for concurrent use.
type Vault struct {
	store  Store
	sealer *sealer
	log    *slog.Logger
	clock  func() time.Time
	ext    Extensions
	change func()

	snap     atomic.Pointer[snapshot]
	reloadMu sync.Mutex // serializes snapshot rebuilds

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// Resolved is one connection with its credential: the value of the secret
// named by auth_secret_key, {{KEY}} references replaced. A Vault's snapshot
// holds them; NewResolved makes one from a connection kept anywhere else.
// A Resolved written as a literal has no credential: its Secret fails
// whenever the connection names one.
type Resolved struct {
	// Connection is shared by every reader of the snapshot: do not modify
	// it (use Clone).
	Connection *Connection
	secret     string
	err        error
	base       *url.URL // Connection.UpstreamBase, parsed once per snapshot
	baseErr    error
	redactions []string
	accounts   map[string]string // refresh tokens by account subject
	approvals  *approval.Policy  // the connection's approval rules, built once per snapshot
	built      bool              // made by a Vault or NewResolved
}

// ErrNotResolved is returned by the methods of a Resolved that neither a
// Vault nor NewResolved made, when what they are asked for is not there.
var ErrNotResolved = errors.New("credvault: connection not resolved (make it with NewResolved)")

// Secret returns the resolved upstream credential, "" when the connection
// has no auth_secret_key (an MCP upstream without credentials), or an error
// matching ErrCredentialUnresolved.
func (r *Resolved) Secret() (string, error) {
	if !r.built && (r.Connection == nil || r.Connection.AuthSecretKey != "") {
		return "", fmt.Errorf("%w: %w", ErrCredentialUnresolved, ErrNotResolved)
	}
	return r.secret, r.err
}

// Redactions returns every form in which the connection's credential can
// travel upstream and come back in a response, for a proxy to strip from
// what it returns. These are:
//   - the resolved secret, and its query-escaped, path-escaped (upper- and
//     lower-case hex) and JSON-escaped forms;
//   - the whole injected header value in bearer and header_key modes;
//   - the same forms of each credential variable value the secret
//     references as {{KEY}}, when it is at least MinSecretLen bytes.
//
// Shorter variable values are more likely identifiers than secrets. They
// would be replaced wherever their bytes occur by chance. The secret itself
// is at least MinSecretLen bytes: shorter values are refused when written,
// and a {{KEY}} secret that resolves shorter is unresolved.
//
// The list is longest first, without duplicates. It is empty when the
// connection has no credential or it is unresolved. The slice is shared by
// every reader of the snapshot: do not modify it.
func (r *Resolved) Redactions() []string { return r.redactions }

// UpstreamBase returns Connection.UpstreamBase, parsed when the snapshot was
// built. The URL is shared by every reader: copy it before changing it. An
// error means the connection cannot be forwarded to.
func (r *Resolved) UpstreamBase() (*url.URL, error) {
	if r.built {
		return r.base, r.baseErr
	}
	if r.Connection == nil {
		return nil, ErrNotResolved
	}
	if err := ValidateBaseURL(r.Connection.BaseURL); err != nil {
		return nil, err
	}
	return r.Connection.UpstreamBase()
}

type snapshot struct {
	byID      map[string]*Resolved
	ordered   []*Connection // sorted by id
	variables []Variable    // sorted by key
	blobs     map[string][]byte
	toolPins  map[string][]byte
}

// New opens a vault on cfg.Store. It checks the master key against the
// store's key-check value (writing one into a new store), fails with
// ErrWrongMasterKey on a mismatch, loads the first snapshot and starts
// polling for changes made elsewhere. Call Close to stop polling.
func New(ctx context.Context, cfg Config) (*Vault, error) {
	if cfg.Store == nil {
		return nil, errors.New("credvault: Config.Store is required")
	}
	if !cfg.MasterKey.set {
		return nil, fmt.Errorf("%w: Config.MasterKey is not set", ErrInvalidMasterKey)
	}
	s, err := newSealer(cfg.MasterKey)
	if err != nil {
		return nil, err
	}
	v := &Vault{
		store:  cfg.Store,
		sealer: s,
		log:    cfg.Logger,
		clock:  cfg.Clock,
		ext:    cfg.Extensions,
		change: cfg.OnChange,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	if v.log == nil {
		v.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if v.clock == nil {
		v.clock = time.Now
	}
	if err := v.checkKey(ctx); err != nil {
		return nil, err
	}
	gen, err := v.store.Generation(ctx)
	if err != nil {
		return nil, err
	}
	if err := v.reload(ctx); err != nil {
		return nil, err
	}
	interval := cfg.PollInterval
	if interval == 0 {
		interval = DefaultPollInterval
	}
	if interval < 0 {
		close(v.done)
	} else {
		go v.poll(interval, gen)
	}
	return v, nil
}

func (v *Vault) checkKey(ctx context.Context) error {
	recs, err := v.store.Load(ctx)
	if err != nil {
		return err
	}
	if len(recs.KeyCheck) == 0 {
		return v.store.Update(ctx, func(r *Records) error {
			if len(r.KeyCheck) > 0 {
				return v.verifyKeyCheck(r.KeyCheck) // another process won the race
			}
			kc, err := v.sealer.seal(kindKeyCheck, "master", 1, []byte(keyCheckPlaintext))
			r.KeyCheck = kc
			return err
		})
	}
	return v.verifyKeyCheck(recs.KeyCheck)
}

func (v *Vault) verifyKeyCheck(kc []byte) error {
	pt, err := v.sealer.open(kindKeyCheck, "master", 1, kc)
	if err != nil || string(pt) != keyCheckPlaintext {
		return ErrWrongMasterKey
	}
	return nil
}

// Close stops polling. It does not close the Store.
func (v *Vault) Close() error {
	v.closeOnce.Do(func() {
		select {
		case <-v.done: // polling disabled
		default:
			close(v.stop)
			<-v.done
		}
	})
	return nil
}

func (v *Vault) poll(interval time.Duration, gen uint64) {
	defer close(v.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-v.stop
		cancel()
	}()
	var changes <-chan struct{} // nil, never ready, unless the store notifies
	if n, ok := v.store.(Notifier); ok {
		changes = n.Changes()
	}
	// An outage is logged when it starts and when it ends, not at every
	// poll: a shared database may stay away for minutes.
	failing := false
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
		case <-changes:
		}
		g, err := v.store.Generation(ctx)
		if err == nil && g != gen {
			err = v.reload(ctx)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			v.log.Warn("credvault: the store does not answer; serving what was loaded", "err", err)
		case err == nil && failing:
			failing = false
			v.log.Info("credvault: the store answers again")
		}
		if err == nil {
			gen = g
		}
	}
}

// reload rebuilds the snapshot from the store.
func (v *Vault) reload(ctx context.Context) error {
	v.reloadMu.Lock()
	defer v.reloadMu.Unlock()
	recs, err := v.store.Load(ctx)
	if err != nil {
		return err
	}
	v.snap.Store(v.buildSnapshot(recs))
	if v.change != nil {
		v.change()
	}
	return nil
}

func (v *Vault) buildSnapshot(recs *Records) *snapshot {
	vars := make(map[string]string, len(recs.Variables))
	s := &snapshot{byID: make(map[string]*Resolved, len(recs.Connections)), blobs: recs.Blobs, toolPins: recs.ToolPins}
	for _, key := range sortedKeys(recs.Variables) {
		rec := recs.Variables[key]
		s.variables = append(s.variables, rec.Variable)
		pt, err := v.sealer.open(kindVariable, key, rec.Variable.Version, rec.SealedValue)
		if err != nil {
			v.log.Error("credvault: credential variable does not open; connections using it are unresolved", "key", key)
			continue
		}
		vars[key] = string(pt)
	}
	for _, id := range sortedKeys(recs.Connections) {
		rec := recs.Connections[id]
		c := &rec.Connection
		r := &Resolved{Connection: c, built: true, approvals: approvalPolicy(c)}
		r.base, r.baseErr = c.UpstreamBase()
		s.byID[id] = r
		s.ordered = append(s.ordered, c)
		if c.AuthSecretKey == "" && c.AuthMode != AuthOAuth2AuthorizationCode {
			continue
		}
		secrets, err := v.openSecrets(c, rec.SealedSecrets)
		if err != nil {
			v.log.Error("credvault: connection secrets do not open", "connection", id)
			r.err = fmt.Errorf("%w: the stored secrets of connection %q do not open", ErrCredentialUnresolved, id)
			continue
		}
		r.accounts = splitAccounts(secrets)
		if c.AuthSecretKey == "" {
			continue
		}
		raw, ok := secrets[c.AuthSecretKey]
		if !ok {
			r.err = fmt.Errorf("%w: connection %q has no secret %q", ErrCredentialUnresolved, id, c.AuthSecretKey)
			continue
		}
		r.secret, r.err = resolveTemplate(raw, vars)
		if r.err == nil && len(r.secret) < MinSecretLen && raw != r.secret {
			// The value was checked at creation; what its variables hold
			// now is checked here.
			r.secret, r.err = "", fmt.Errorf("%w: the secret of connection %q resolves to fewer than %d bytes, too short to redact from responses",
				ErrCredentialUnresolved, id, MinSecretLen)
		}
		if r.err == nil {
			r.redactions = redactions(c, r.secret, referencedValues(raw, vars))
		}
	}
	return s
}

func (v *Vault) openSecrets(c *Connection, sealed []byte) (map[string]string, error) {
	pt, err := v.sealer.open(kindConnectionSecrets, c.ID, c.SecretVersion, sealed)
	if err != nil {
		return nil, err
	}
	var m map[string]string
	if err := json.Unmarshal(pt, &m); err != nil {
		return nil, errOpen
	}
	return m, nil
}

func (v *Vault) sealSecrets(id string, version int64, secrets map[string]string) ([]byte, error) {
	pt, err := json.Marshal(secrets)
	if err != nil {
		return nil, fmt.Errorf("credvault: encoding secrets: %w", err)
	}
	return v.sealer.seal(kindConnectionSecrets, id, version, pt)
}

func (v *Vault) now() time.Time { return v.clock().UTC().Truncate(time.Millisecond) }

// Lookup returns a connection and its resolved credential from the current
// snapshot: a map read, safe for the per-request hot path.
func (v *Vault) Lookup(id string) (*Resolved, bool) {
	r, ok := v.snap.Load().byID[id]
	return r, ok
}

// Connections returns copies of every connection, sorted by id.
func (v *Vault) Connections() []*Connection {
	s := v.snap.Load()
	out := make([]*Connection, len(s.ordered))
	for i, c := range s.ordered {
		out[i] = c.Clone()
	}
	return out
}

// Connection returns a copy of one connection, or ErrNotFound.
func (v *Vault) Connection(id string) (*Connection, error) {
	r, ok := v.Lookup(id)
	if !ok {
		return nil, ErrNotFound
	}
	return r.Connection.Clone(), nil
}

// Variables returns the metadata of every credential variable, sorted by key.
func (v *Vault) Variables() []Variable {
	return slices.Clone(v.snap.Load().variables)
}

// write runs fn in a store transaction and refreshes the snapshot.
func (v *Vault) write(ctx context.Context, fn func(*Records) error) error {
	if err := v.store.Update(ctx, func(r *Records) error {
		if err := v.verifyKeyCheck(r.KeyCheck); err != nil {
			return err
		}
		return fn(r)
	}); err != nil {
		return err
	}
	return v.reload(ctx)
}

// Create stores a new connection with its secrets (name → value; values may
// contain {{KEY}} references). Defaults are applied (status active,
// protocol http, header and query names, "Bearer " prefix for bearer mode,
// then Config.Extensions.Check's), secret_version is 1 and the
// vault-maintained fields are set. It returns the stored connection, a
// *ValidationError, or ErrExists.
func (v *Vault) Create(ctx context.Context, c *Connection, secrets map[string]string) (*Connection, error) {
	n := configOnly(c)
	if err := v.completeConfig(n, sortedKeys(secrets)); err != nil {
		return nil, err
	}
	if err := validateSecrets(secrets); err != nil {
		return nil, err
	}
	now := v.now()
	n.CreatedAt, n.UpdatedAt = now, now
	n.SecretVersion = 1
	n.CredentialKeys = sortedKeys(secrets)
	n.NextRotationDueAt = nextDue(n, now)
	err := v.write(ctx, func(r *Records) error {
		if _, ok := r.Connections[n.ID]; ok {
			return fmt.Errorf("%w: %q", ErrExists, n.ID)
		}
		sealed, err := v.sealSecrets(n.ID, n.SecretVersion, secrets)
		if err != nil {
			return err
		}
		r.Connections[n.ID] = &ConnectionRecord{Connection: *n, SealedSecrets: sealed}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return n.Clone(), nil
}

// Update changes a connection's configuration: fn receives a copy of the
// stored connection and edits it. Vault-maintained fields (id, secret
// version, credential keys, timestamps, last test, rotation history) are
// restored after fn; next_rotation_due_at is recomputed. The result is
// validated against the stored secret names. It returns the updated
// connection, ErrNotFound, a *ValidationError or fn's error.
func (v *Vault) Update(ctx context.Context, id string, fn func(*Connection) error) (*Connection, error) {
	var out *Connection
	err := v.write(ctx, func(r *Records) error {
		rec, ok := r.Connections[id]
		if !ok {
			return ErrNotFound
		}
		old := rec.Connection
		n := old.Clone()
		if err := fn(n); err != nil {
			return err
		}
		n = configOnly(n)
		if err := v.completeConfig(n, old.CredentialKeys); err != nil {
			return err
		}
		n.ID = old.ID
		n.CredentialKeys = old.CredentialKeys
		n.SecretVersion = old.SecretVersion
		n.CreatedAt, n.LastRotatedAt = old.CreatedAt, old.LastRotatedAt
		n.LastTest, n.RotationHistory, n.OAuthAccounts = old.LastTest, old.RotationHistory, old.OAuthAccounts
		n.UpdatedAt = v.now()
		n.NextRotationDueAt = nextDue(n, n.UpdatedAt)
		rec.Connection = *n
		out = n.Clone()
		return nil
	})
	return out, err
}

// Delete removes a connection and its secrets, or returns ErrNotFound.
func (v *Vault) Delete(ctx context.Context, id string) error {
	return v.write(ctx, func(r *Records) error {
		if _, ok := r.Connections[id]; !ok {
			return ErrNotFound
		}
		delete(r.Connections, id)
		delete(r.ToolPins, id)
		return nil
	})
}

// Rotation is a credential rotation request, applied atomically: a crash
// leaves the old or the new version, never a mix.
type Rotation struct {
	// Secrets lists the secrets to replace; a nil value deletes that
	// secret. Secrets not listed are kept.
	Secrets map[string]*string
	// RotatedBy names the rotating subject (optional).
	RotatedBy string
	// Reason says why, e.g. "scheduled", "compromised" or "manual"
	// (optional; empty means "manual").
	Reason string
}

// Rotate replaces secrets atomically: in one transaction the new secret set
// is sealed under secret_version+1, last_rotated_at and
// next_rotation_due_at are updated and a rotation_history entry is added. A
// crash leaves either the old or the new version, never a mix.
func (v *Vault) Rotate(ctx context.Context, id string, rot Rotation) (*Connection, error) {
	if len(rot.Secrets) == 0 {
		return nil, invalid("secrets", "must name at least one secret to replace or delete")
	}
	if rot.Reason == "" {
		rot.Reason = "manual"
	}
	if err := validateRotationMeta(rot.RotatedBy, rot.Reason); err != nil {
		return nil, err
	}
	var out *Connection
	err := v.write(ctx, func(r *Records) error {
		rec, ok := r.Connections[id]
		if !ok {
			return ErrNotFound
		}
		c := rec.Connection.Clone()
		secrets, err := v.openSecrets(c, rec.SealedSecrets)
		if err != nil {
			return fmt.Errorf("%w: the stored secrets of connection %q do not open", ErrCredentialUnresolved, id)
		}
		accounts := splitAccounts(secrets)
		for name, val := range rot.Secrets {
			if val == nil {
				delete(secrets, name)
			} else {
				secrets[name] = *val
			}
		}
		if err := c.validateSettings(sortedKeys(secrets)); err != nil {
			return err
		}
		if err := validateSecrets(secrets); err != nil {
			return err
		}
		now := v.now()
		c.SecretVersion++
		c.LastRotatedAt, c.UpdatedAt = now, now
		c.NextRotationDueAt = nextDue(c, now)
		c.CredentialKeys = sortedKeys(secrets)
		c.RotationHistory = append(c.RotationHistory, RotationEvent{Version: c.SecretVersion, At: now, By: rot.RotatedBy, Reason: rot.Reason})
		if extra := len(c.RotationHistory) - maxRotationHistory; extra > 0 {
			c.RotationHistory = slices.Delete(c.RotationHistory, 0, extra)
		}
		joinAccounts(secrets, accounts)
		sealed, err := v.sealSecrets(id, c.SecretVersion, secrets)
		if err != nil {
			return err
		}
		rec.Connection, rec.SealedSecrets = *c, sealed
		out = c.Clone()
		return nil
	})
	return out, err
}

// RecordTest stores the result of an upstream probe as the connection's
// last_test.
func (v *Vault) RecordTest(ctx context.Context, id string, res TestResult) error {
	return v.write(ctx, func(r *Records) error {
		rec, ok := r.Connections[id]
		if !ok {
			return ErrNotFound
		}
		rec.Connection.LastTest = &res
		return nil
	})
}

// PutVariable creates or replaces a credential variable. created reports
// whether the key was new. createdBy is kept from the first write unless a
// later write names one.
func (v *Vault) PutVariable(ctx context.Context, key, value, createdBy string) (vr Variable, created bool, err error) {
	if err := ValidateVariableKey(key); err != nil {
		return Variable{}, false, err
	}
	if value == "" || len(value) > maxSecretLen || hasControl(value) {
		return Variable{}, false, invalid("value", "must be 1-%d bytes without control characters", maxSecretLen)
	}
	if strings.Contains(value, "{{") || strings.Contains(value, "}}") {
		return Variable{}, false, invalid("value", "must not contain {{ or }}: variables do not nest")
	}
	if len(createdBy) > maxSubjectLen || hasControl(createdBy) {
		return Variable{}, false, invalid("created_by_subject", "must be at most %d bytes without control characters", maxSubjectLen)
	}
	err = v.write(ctx, func(r *Records) error {
		if id, short := v.resolvesShort(r, key, value); short {
			return invalid("value", "would make the secret of connection %q shorter than %d bytes, the minimum: "+
				"the gateway removes the secret from every response, and a shorter one also matches ordinary text there", id, MinSecretLen)
		}
		now := v.now()
		rec, ok := r.Variables[key]
		created = !ok
		if created {
			rec = &VariableRecord{Variable: Variable{Key: key, CreatedAt: now}}
			r.Variables[key] = rec
		}
		rec.Variable.Version++
		rec.Variable.UpdatedAt = now
		if createdBy != "" {
			rec.Variable.CreatedBySubject = createdBy
		}
		sealed, err := v.sealer.seal(kindVariable, key, rec.Variable.Version, []byte(value))
		rec.SealedValue = sealed
		vr = rec.Variable
		return err
	})
	return vr, created, err
}

// DeleteVariable removes a credential variable. Unless force is set, a
// variable that a connection's secrets still reference is kept and a
// *VariableInUseError is returned.
func (v *Vault) DeleteVariable(ctx context.Context, key string, force bool) error {
	return v.write(ctx, func(r *Records) error {
		if _, ok := r.Variables[key]; !ok {
			return ErrVariableNotFound
		}
		if !force {
			if users := v.users(r, key); len(users) > 0 {
				return &VariableInUseError{Key: key, Connections: users}
			}
		}
		delete(r.Variables, key)
		return nil
	})
}

// resolvesShort reports a connection whose credential, with variable key
// set to value, would resolve to fewer than MinSecretLen bytes.
func (v *Vault) resolvesShort(r *Records, key, value string) (string, bool) {
	for _, id := range sortedKeys(r.Connections) {
		rec := r.Connections[id]
		if rec.Connection.AuthSecretKey == "" {
			continue
		}
		secrets, err := v.openSecrets(&rec.Connection, rec.SealedSecrets)
		if err != nil {
			continue
		}
		raw := secrets[rec.Connection.AuthSecretKey]
		refs, _ := TemplateReferences(raw)
		if !slices.Contains(refs, key) {
			continue
		}
		vars := map[string]string{key: value}
		for _, k := range refs {
			if vr, ok := r.Variables[k]; ok && k != key {
				if pt, err := v.sealer.open(kindVariable, k, vr.Variable.Version, vr.SealedValue); err == nil {
					vars[k] = string(pt)
				}
			}
		}
		if s, err := resolveTemplate(raw, vars); err == nil && len(s) < MinSecretLen {
			return id, true
		}
	}
	return "", false
}

// VariableUsers returns the ids of the connections whose secrets reference
// the credential variable key as {{KEY}}, sorted; whether the variable
// exists does not matter.
func (v *Vault) VariableUsers(ctx context.Context, key string) ([]string, error) {
	recs, err := v.store.Load(ctx)
	if err != nil {
		return nil, err
	}
	return v.users(recs, key), nil
}

func (v *Vault) users(r *Records, key string) []string {
	var users []string
	for _, id := range sortedKeys(r.Connections) {
		rec := r.Connections[id]
		secrets, err := v.openSecrets(&rec.Connection, rec.SealedSecrets)
		if err != nil {
			continue // unreadable secrets cannot be resolved anyway
		}
		splitAccounts(secrets)
		if referencesKey(secrets, key) {
			users = append(users, id)
		}
	}
	return users
}

func referencesKey(secrets map[string]string, key string) bool {
	for _, val := range secrets {
		refs, _ := TemplateReferences(val)
		if slices.Contains(refs, key) {
			return true
		}
	}
	return false
}

// configOnly returns a copy of c with the vault-maintained fields cleared.
// completeConfig applies the defaults of c's configuration, its own and
// its extensions', and checks it given the names of its secrets.
func (v *Vault) completeConfig(c *Connection, secretNames []string) error {
	c.normalize()
	if err := c.validateConfig(secretNames); err != nil {
		return err
	}
	if v.ext.Check != nil {
		return v.ext.Check(c)
	}
	if len(c.Extensions) > 0 {
		return invalid(slices.Sorted(maps.Keys(c.Extensions))[0], "is not a field of a connection")
	}
	return nil
}

func configOnly(c *Connection) *Connection {
	n := c.Clone()
	n.CredentialKeys, n.SecretVersion = nil, 0
	n.LastRotatedAt, n.NextRotationDueAt, n.CreatedAt, n.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	n.LastTest, n.RotationHistory, n.OAuthAccounts = nil, nil, nil
	return n
}

// nextDue is the rotation due date: the last rotation (or creation) plus
// the interval; zero without an interval.
func nextDue(c *Connection, now time.Time) time.Time {
	if c.RotationIntervalDays <= 0 {
		return time.Time{}
	}
	base := c.LastRotatedAt
	if base.IsZero() {
		base = c.CreatedAt
	}
	if base.IsZero() {
		base = now
	}
	return base.AddDate(0, 0, c.RotationIntervalDays)
}
