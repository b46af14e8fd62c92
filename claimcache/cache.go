package claimcache

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/internal/heldmem"
)

// Defaults for the zero Config; the gateway's settings use the same ones.
const (
	DefaultTTL                  = 30 * time.Second
	DefaultRefreshInterval      = 10 * time.Second
	DefaultEarlyRefreshInterval = 2 * time.Second
)

// maxFeedChangedRetries bounds how often one refresh rereads a feed that
// changed under it before giving up until the next refresh.
const maxFeedChangedRetries = 3

// Config configures a Cache: where the claims come from, and the Options
// policy.
type Config struct {
	// Source delivers the claims. Required.
	Source Source
	// Services are the service slugs tracked from the start; SetServices
	// changes the set later. Lookups for other services fail.
	Services []string

	Options

	// Logger receives refresh failures. Nil discards them.
	Logger *slog.Logger
	// Clock, when set, replaces the system clock, so that a test can move
	// time: it stamps refreshes, and every Lookup and Status reads it to
	// check the snapshot's TTL. Leave it nil outside tests: lookups then
	// read no clock, because a timer ends each snapshot's lease when its TTL
	// runs out.
	Clock func() time.Time
	// OnRefresh, when set, is called after every refresh attempt with the
	// service, the number of approved tuples now held, and the error (nil on
	// success, including an unchanged feed). It suits metrics and readiness.
	OnRefresh func(service string, claims int, err error)
}

// Options is the cache's timing policy. Its zero value is the safe default:
// each field left at zero takes the documented default; only
// EarlyRefreshInterval can be switched off, by a negative value.
type Options struct {
	// TTL is how long a snapshot stays usable after the refresh that made or
	// confirmed it began. Zero means DefaultTTL. It must exceed
	// RefreshInterval.
	TTL time.Duration
	// RefreshInterval is the background poll period of Run. Zero means
	// DefaultRefreshInterval.
	RefreshInterval time.Duration
	// EarlyRefreshInterval is the least time between two refreshes of one
	// service triggered by lookup misses. Zero means
	// DefaultEarlyRefreshInterval; negative disables early refreshes.
	EarlyRefreshInterval time.Duration
	// ChangeWait is how long Run asks a WaitingSource to hold one request
	// for a service's changes. Each answer renews the snapshot from when
	// its request was sent. So two waits in a row must fit in the TTL with
	// room for the round trips: it must be under half the TTL. Zero means
	// RefreshInterval or a third of the TTL, whichever is shorter;
	// negative means never: Run polls every RefreshInterval.
	ChangeWait time.Duration
}

// Cache holds the approved claims of a set of services. It is safe for
// concurrent use; lookups take no lock.
type Cache struct {
	source    Source
	ttl       time.Duration
	interval  time.Duration
	early     time.Duration
	wait      time.Duration // ChangeWait; 0: never
	log       *slog.Logger
	clock     func() time.Time // nil: the monotonic clock
	base      time.Time        // instants are kept as nanoseconds since base
	onRefresh func(string, int, error)

	mu       sync.Mutex // serialises SetServices
	services atomic.Pointer[map[string]*service]
	changed  chan struct{} // wakes Run when the service set changes

	held heldmem.Counter // the snapshots' arrays (HeldBytes)
}

// service is the per-slug state. A good refresh leases its snapshot for the
// TTL from the refresh's start; lookups use only a leased snapshot, and a
// timer ends the lease unless another good refresh renews it first.
type service struct {
	name        string
	snap        atomic.Pointer[view] // the last one built, leased or not
	leased      atomic.Pointer[view] // snap while its lease runs, else nil
	refreshedAt atomic.Int64         // when the last good refresh began (see Cache.now); 0: never
	leaseMu     sync.Mutex           // orders renewals and expiry
	lease       *time.Timer          // ends the lease; nil before the first
	earlyAsked  atomic.Bool          // an early refresh is pending or was made within EarlyRefreshInterval
	wake        chan struct{}        // capacity 1: a pending early refresh
	refreshMu   sync.Mutex           // one refresh at a time
}

// New returns a Cache configured by cfg. It loads nothing: call Run, or
// Refresh for each service, before lookups can succeed.
func New(cfg Config) (*Cache, error) {
	if cfg.Source == nil {
		return nil, errors.New("claimcache: Config.Source is nil")
	}
	c := &Cache{
		source:    cfg.Source,
		ttl:       cmp.Or(cfg.TTL, DefaultTTL),
		interval:  cmp.Or(cfg.RefreshInterval, DefaultRefreshInterval),
		early:     cmp.Or(cfg.EarlyRefreshInterval, DefaultEarlyRefreshInterval),
		log:       cfg.Logger,
		clock:     cfg.Clock,
		onRefresh: cfg.OnRefresh,
		changed:   make(chan struct{}, 1),
	}
	if c.ttl < 0 || c.interval < 0 {
		return nil, errors.New("claimcache: TTL and RefreshInterval must not be negative")
	}
	if c.ttl <= c.interval {
		return nil, fmt.Errorf("claimcache: TTL %v must exceed RefreshInterval %v, or snapshots go stale between refreshes", c.ttl, c.interval)
	}
	switch c.wait = cmp.Or(cfg.ChangeWait, min(c.interval, c.ttl/3)); {
	case c.wait < 0:
		c.wait = 0
	case 2*c.wait >= c.ttl:
		return nil, fmt.Errorf("claimcache: ChangeWait %v must be under half the TTL %v, or snapshots go stale between two waits", c.wait, c.ttl)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.clock != nil {
		c.base = c.clock()
	} else {
		c.base = time.Now()
	}
	c.base = c.base.Add(-1) // so that now() is positive from the start
	c.services.Store(&map[string]*service{})
	c.SetServices(cfg.Services...)
	return c, nil
}

// now returns the current instant as nanoseconds since c.base, at least 1 so
// that 0 can mean "never" (even if an injected clock goes backwards). Without
// an injected clock it reads only the monotonic clock.
func (c *Cache) now() int64 {
	var d time.Duration
	if c.clock != nil {
		d = c.clock().Sub(c.base)
	} else {
		d = time.Since(c.base)
	}
	return max(int64(d), 1)
}

// SetServices replaces the set of tracked services. Services that stay keep
// their snapshot; new ones are unavailable until loaded; removed ones are
// forgotten.
func (c *Cache) SetServices(names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.services.Load()
	next := make(map[string]*service, len(names))
	for _, n := range names {
		if s, ok := old[n]; ok {
			next[n] = s
		} else {
			next[n] = &service{name: n, wake: make(chan struct{}, 1)}
		}
	}
	c.services.Store(&next)
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Lookup reports whether the claim <namespace, publicKey, service> is
// approved. publicKey is the raw 32-byte Ed25519 key. Its errors wrap:
//   - ErrUnavailable when the service's snapshot is missing or stale;
//   - ErrNotApproved when a fresh snapshot has no such claim (a
//     *RevokedError or *RejectedError when a change since the last full
//     read revoked or rejected it);
//   - ErrLookupFailed when the service is not tracked or the key is
//     malformed.
//
// A miss or a stale snapshot requests an early refresh of the service from
// Run.
func (c *Cache) Lookup(service, namespace string, publicKey []byte) (Approval, error) {
	s := (*c.services.Load())[service]
	if s == nil {
		return Approval{}, fmt.Errorf("%w: service %q is not tracked", ErrLookupFailed, service)
	}
	if !validKey(publicKey) {
		return Approval{}, fmt.Errorf("%w: public key is %d bytes", ErrLookupFailed, len(publicKey))
	}
	snap := c.fresh(s)
	if snap == nil {
		c.requestEarlyRefresh(s)
		return Approval{}, fmt.Errorf("%w: service %q has no fresh snapshot", ErrUnavailable, service)
	}
	if id, at, ok := snap.find(namespace, (*[ed25519.PublicKeySize]byte)(publicKey)); ok {
		return Approval{ClaimID: id, ApprovedAt: time.UnixMilli(at).UTC()}, nil
	}
	c.requestEarlyRefresh(s)
	if id, rejected := snap.endedClaim(namespace, publicKey); rejected {
		return Approval{}, &RejectedError{ClaimID: id}
	} else if id != "" {
		return Approval{}, &RevokedError{ClaimID: id}
	}
	return Approval{}, ErrNotApproved
}

// fresh returns the service's snapshot while its lease runs, or nil. With an
// injected clock it also checks the TTL against that clock.
func (c *Cache) fresh(s *service) *view {
	snap := s.leased.Load()
	if snap != nil && c.clock != nil && c.now()-s.refreshedAt.Load() >= int64(c.ttl) {
		return nil
	}
	return snap
}

// renew installs snap, built (or confirmed) by the refresh that began at
// began, and leases it for the rest of its TTL.
func (c *Cache) renew(s *service, snap *view, began int64) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	s.snap.Store(snap)
	s.refreshedAt.Store(began)
	left := c.leaseLeft(s)
	if left <= 0 { // the refresh took longer than the TTL
		s.leased.Store(nil)
		return
	}
	s.leased.Store(snap)
	if s.lease == nil {
		s.lease = time.AfterFunc(left, func() { c.expire(s) })
	} else {
		s.lease.Reset(left)
	}
}

// expire ends the service's lease when the lease timer fires, unless a
// renewal that raced with the timer extended it.
func (c *Cache) expire(s *service) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if left := c.leaseLeft(s); left > 0 {
		s.lease.Reset(left)
		return
	}
	s.leased.Store(nil)
}

// leaseLeft returns how long the lease of the last good refresh still runs.
func (c *Cache) leaseLeft(s *service) time.Duration {
	return c.ttl - time.Duration(c.now()-s.refreshedAt.Load())
}

// requestEarlyRefresh wakes the service's refresher at most once per
// EarlyRefreshInterval, however many lookups miss at the same time, so a
// burst of unapproved callers costs the control plane one read. Run's
// poller clears earlyAsked an EarlyRefreshInterval after it takes the wake.
func (c *Cache) requestEarlyRefresh(s *service) {
	if c.early < 0 || s.earlyAsked.Load() || !s.earlyAsked.CompareAndSwap(false, true) {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Status describes one service's snapshot, for readiness checks and metrics.
type Status struct {
	Loaded      bool      // a snapshot was built at least once
	Fresh       bool      // Lookup would use it now
	RefreshedAt time.Time // when the last good refresh began; zero if never
	Claims      int       // approved tuples held
	Skipped     int       // malformed or foreign records left out of it
}

// Status reports the state of service's snapshot. An untracked service
// reports the zero Status.
func (c *Cache) Status(service string) Status {
	s := (*c.services.Load())[service]
	if s == nil {
		return Status{}
	}
	var st Status
	snap := s.snap.Load()
	at := s.refreshedAt.Load()
	if snap == nil || at == 0 {
		return st
	}
	st.Loaded = true
	st.RefreshedAt = c.base.Add(time.Duration(at))
	st.Fresh = c.fresh(s) != nil
	st.Claims, st.Skipped = snap.claims, snap.skipped
	return st
}

// Refresh reads service's claims from the Source now and, on success,
// installs the new snapshot (or renews the current one when the Source
// reports it unchanged). From a ChangeSource that delivered a snapshot
// before, it reads only the changes since, and everything again when the
// source no longer has them (ErrVersionExpired). Refreshes of one service
// never overlap.
func (c *Cache) Refresh(ctx context.Context, service string) error {
	s := (*c.services.Load())[service]
	if s == nil {
		return fmt.Errorf("%w: service %q is not tracked", ErrLookupFailed, service)
	}
	return c.refresh(ctx, s)
}

func (c *Cache) refresh(ctx context.Context, s *service) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	err := c.load(ctx, s)
	c.report(ctx, s, err)
	return err
}

// report logs a failed refresh and tells OnRefresh about every one.
func (c *Cache) report(ctx context.Context, s *service, err error) {
	claims := 0
	if snap := s.snap.Load(); snap != nil {
		claims = snap.claims
	}
	if err != nil && ctx.Err() == nil {
		c.log.LogAttrs(ctx, slog.LevelWarn, "claims refresh failed",
			slog.String("service", s.name), slog.String("error", err.Error()))
	}
	if c.onRefresh != nil {
		c.onRefresh(s.name, claims, err)
	}
}

func (c *Cache) load(ctx context.Context, s *service) error {
	current := s.snap.Load()
	version := ""
	if current != nil {
		version = current.version
	}
	if cs, ok := c.source.(ChangeSource); ok && version != "" {
		err := c.sync(ctx, s, cs, current)
		if !errors.Is(err, ErrVersionExpired) {
			return err
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "claims changes unavailable; reading every claim again",
			slog.String("service", s.name), slog.String("error", err.Error()))
	}
	for attempt := 1; ; attempt++ {
		began := c.now()
		b := &builder{service: s.name, held: &c.held}
		var got string
		var err error
		if h, ok := c.source.(*HTTPSource); ok { // it says how many claims come
			got, err = h.approvedClaims(ctx, s.name, version, b.add, b.reserve)
		} else {
			got, err = c.source.ApprovedClaims(ctx, s.name, version, b.add)
		}
		switch {
		case err == nil:
			snap, err := b.build(got)
			if err != nil {
				return fmt.Errorf("claimcache: refreshing service %q: %w", s.name, err)
			}
			c.renew(s, newView(snap), began)
			return nil
		case errors.Is(err, ErrNotModified) && current != nil:
			c.renew(s, current, began)
			return nil
		case errors.Is(err, ErrFeedChanged) && attempt < maxFeedChangedRetries:
			continue
		}
		return fmt.Errorf("claimcache: refreshing service %q: %w", s.name, err)
	}
}

// sync applies the changes since current's version, and installs the result.
func (c *Cache) sync(ctx context.Context, s *service, cs ChangeSource, current *view) error {
	began := c.now()
	e := current.edit(s.name, &c.held)
	version, err := cs.ClaimChanges(ctx, s.name, current.version, e.apply)
	if err != nil {
		return fmt.Errorf("claimcache: changes of service %q: %w", s.name, err)
	}
	next, err := e.done(version)
	if err != nil {
		return fmt.Errorf("claimcache: changes of service %q: %w", s.name, err)
	}
	c.renew(s, next, began)
	return nil
}

// Run refreshes every tracked service now and then every RefreshInterval,
// and whenever a lookup miss asks for an early refresh, until ctx is done.
// From a WaitingSource, once a service is loaded, Run instead keeps one
// request for its changes waiting (ChangeWait) and applies each answer as
// it comes. An approval or a revocation then reaches the cache as soon as
// the source has it. Run polls again when a request fails or the source
// answers without waiting. Services added by SetServices are picked up at
// once. Run returns ctx's error after every refresh it started has
// stopped. Call it once.
func (c *Cache) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	workers := map[*service]context.CancelFunc{}
	defer func() {
		for _, cancel := range workers {
			cancel()
		}
		wg.Wait()
	}()
	for {
		current := *c.services.Load()
		for s, cancel := range workers {
			if current[s.name] != s {
				cancel()
				delete(workers, s)
			}
		}
		for _, s := range current {
			if _, ok := workers[s]; !ok {
				wctx, cancel := context.WithCancel(ctx)
				workers[s] = cancel
				wg.Go(func() { c.poll(wctx, s) })
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.changed:
		}
	}
}

// poll refreshes one service until ctx is done.
func (c *Cache) poll(ctx context.Context, s *service) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	ws, _ := c.source.(WaitingSource)
	for {
		switch c.follow(ctx, s, ws) {
		case nothingToFollow:
			// A good first load gives a version to follow at once.
			if c.refresh(ctx, s) == nil && ws != nil && c.wait > 0 && s.snap.Load().version != "" {
				continue
			}
		case followFailed:
			_ = c.refresh(ctx, s) // logged and reported by refresh
		case notHeld:
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
			// The next pass is the early refresh; the one after it may be
			// asked for an EarlyRefreshInterval from now.
			time.AfterFunc(c.early, func() { s.earlyAsked.Store(false) })
		}
	}
}

// How follow ended.
const (
	nothingToFollow = iota // no WaitingSource, or no version held
	followFailed           // a request failed
	notHeld                // the source answered at once, as a poll
)

// follow keeps one request for the service's changes waiting at ws after
// another, for as long as ws holds them. An answer with no change within
// a second (or half the wait, when shorter) was not held: the source does
// not wait, or not now, and the service is polled.
func (c *Cache) follow(ctx context.Context, s *service, ws WaitingSource) int {
	if ws == nil || c.wait == 0 {
		return nothingToFollow
	}
	quick := min(c.wait/2, time.Second)
	for ctx.Err() == nil {
		start := time.Now()
		changed, err := c.waitChanges(ctx, s, ws)
		switch {
		case errors.Is(err, errNoVersion):
			return nothingToFollow
		case err != nil:
			return followFailed
		case !changed && time.Since(start) < quick:
			return notHeld
		}
	}
	return notHeld
}

// errNoVersion: the service holds no version to follow the changes of.
var errNoVersion = errors.New("claimcache: no version to follow")

// waitChanges asks ws for the changes after the version held, waiting
// for one, and installs the result. It holds the service's refresh lock
// only to install it: a refresh that moved the service on meanwhile wins,
// and the delivery is dropped.
func (c *Cache) waitChanges(ctx context.Context, s *service, ws WaitingSource) (changed bool, err error) {
	current := s.snap.Load()
	if current == nil || current.version == "" {
		return false, errNoVersion
	}
	began := c.now()
	e := current.edit(s.name, &c.held)
	version, err := ws.WaitClaimChanges(ctx, s.name, current.version, c.wait, e.apply)
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if err != nil {
		err = fmt.Errorf("claimcache: changes of service %q: %w", s.name, err)
		c.report(ctx, s, err)
		return false, err
	}
	if s.snap.Load() != current {
		return true, nil
	}
	next, err := e.done(version)
	if err != nil {
		err = fmt.Errorf("claimcache: changes of service %q: %w", s.name, err)
		c.report(ctx, s, err)
		return false, err
	}
	c.renew(s, next, began)
	c.report(ctx, s, nil)
	return version != current.version, nil
}
