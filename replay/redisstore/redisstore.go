// Package redisstore keeps the nonces of a fleet of idn gateways in
// Redis, so that a signed request accepted by any replica is refused as a
// replay by every other (RFC 9421 §7.2.2, profile idn-rfc9421-v1). It is
// a gateway.NonceStore; cmd/gateway uses it when GATEWAY_REDIS_URL is set.
//
// A check is one round trip: a Lua script sets the nonce's key if it is
// absent (SET NX), with an expiry that outlives the signature's window on
// any replica. There is no local shortcut: only Redis knows whether
// another replica took a nonce, so a local "fresh" proves nothing, and a
// local "seen" would only refuse a replay Redis refuses anyway.
//
// Three failures refuse a request rather than risk a replay; each is an
// error wrapping replay.ErrUnavailable, which the gateway answers 503
// NONCE_STORE_UNAVAILABLE:
//
//   - Redis does not answer within Config.Timeout.
//   - This host's clock is more than Config.MaxClockSkew from Redis's:
//     nonces are kept for their window plus twice that bound, which covers
//     the replicas' clocks only while each stays within it.
//   - Redis lost its data (a restart without persistence, a failover to a
//     replica that had not caught up). Each of 64 key groups holds a
//     marker, set when the store is first opened; a check that finds its
//     marker gone sets it again and refuses, as replays, signatures that
//     may predate the loss (until their window ends).
//
// The script's keys share a hash tag, so Redis Cluster runs it on one
// node. docs/gateway.md ("Running a fleet") tells how to deploy it.
package redisstore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/replay"
	"github.com/redis/go-redis/v9"
)

// Defaults of Config's zero fields.
const (
	DefaultPrefix       = "idn:replay:"
	DefaultTimeout      = time.Second
	DefaultMaxClockSkew = 2 * time.Second
	DefaultWindow       = 330 * time.Second // the gateway's default max age + future skew
)

// groups is the number of key groups, each with its loss marker. More
// spread the keys over a Cluster's slots; each costs one key.
const groups = 64

// Config configures a Store. URL is required; every other field works at
// its zero value.
type Config struct {
	// URL names the Redis deployment: one server, Sentinel or Cluster
	// (docs/gateway.md, "Running a fleet").
	// Required.
	URL string
	// Prefix starts every key the store writes. Empty means
	// DefaultPrefix; fleets sharing one Redis set one each.
	Prefix string
	// Timeout bounds one check. Zero means DefaultTimeout.
	Timeout time.Duration
	// MaxClockSkew is how far this host's clock may be from Redis's;
	// beyond it every check fails. Zero means DefaultMaxClockSkew.
	MaxClockSkew time.Duration
	// Window is the signature window (max age + future skew): how long
	// after a loss of Redis's data a signature made before it may still
	// pass. Zero means DefaultWindow.
	Window time.Duration
	// Clock returns the current time. Nil means time.Now.
	Clock func() time.Time
}

// Store is a nonce store on Redis, safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	cfg    Config

	opening sync.Mutex  // one open at a time
	opened  atomic.Bool // the eviction policy checked, the markers set
}

var _ httpsig.NonceChecker = (*Store)(nil)

// New connects to cfg.URL, checks that Redis will not evict a nonce
// (maxmemory-policy noeviction, when CONFIG GET is allowed) and sets the
// loss markers that are absent. A Redis that does not answer yet is no
// error: the store refuses every check until it does, then opens.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.URL == "" {
		return nil, errors.New("redisstore: Config.URL is required")
	}
	cfg.Prefix = cmp.Or(cfg.Prefix, DefaultPrefix)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.MaxClockSkew = cmp.Or(cfg.MaxClockSkew, DefaultMaxClockSkew)
	cfg.Window = cmp.Or(cfg.Window, DefaultWindow)
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	client, err := newClient(cfg.URL)
	if err != nil {
		return nil, err
	}
	s := &Store{client: client, cfg: cfg}
	if err := s.open(ctx); err != nil && !errors.Is(err, replay.ErrUnavailable) {
		s.client.Close()
		return nil, err
	}
	return s, nil
}

// open checks the eviction policy and sets the absent markers, once.
func (s *Store) open(ctx context.Context) error {
	if s.opened.Load() {
		return nil
	}
	s.opening.Lock()
	defer s.opening.Unlock()
	if s.opened.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if err := s.checkEviction(ctx); err != nil {
		return err
	}
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for g := range groups {
			p.SetNX(ctx, s.marker(g), 0, 0)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: %w: %w", replay.ErrUnavailable, err)
	}
	s.opened.Store(true)
	return nil
}

// checkEviction refuses a Redis that may evict keys when full: an
// evicted nonce would be accepted again.
func (s *Store) checkEviction(ctx context.Context) error {
	policy, err := s.client.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			return nil // CONFIG is renamed or refused (managed Redis): the operator's word stands
		}
		return fmt.Errorf("redisstore: %w: %w", replay.ErrUnavailable, err)
	}
	if p, ok := policy["maxmemory-policy"]; ok && p != "noeviction" {
		return fmt.Errorf("redisstore: Redis's maxmemory-policy is %q; only noeviction keeps every nonce until it expires", p)
	}
	return nil
}

// check records a nonce. KEYS: the group's loss marker, the nonce.
// ARGV: the nonce's lifetime (ms), the signature's until (unix ms), the
// refusal span after a loss (ms). It answers the verdict (1 fresh, 2
// replay, 3 signed before a loss) and Redis's time (unix ms), which
// measures this host's skew at no extra cost.
var check = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local before = tonumber(redis.call('GET', KEYS[1]))
if before == nil then
  before = now + tonumber(ARGV[3])
  redis.call('SET', KEYS[1], before)
end
if tonumber(ARGV[2]) <= before then
  return {3, now}
end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then
  return {1, now}
end
return {2, now}
`)

// ErrSignedBeforeLoss refuses a signature that Redis may have recorded
// before it lost its data. It wraps httpsig.ErrReplayDetected: the
// client signs again.
var ErrSignedBeforeLoss = fmt.Errorf("redisstore: signed before Redis lost its nonces; sign again: %w", httpsig.ErrReplayDetected)

// CheckNonce records nonce in scope until the given time. It returns nil
// for a fresh nonce, an error wrapping replay.ErrReplay for one already
// recorded (or ErrSignedBeforeLoss), and one wrapping
// replay.ErrUnavailable when Redis does not answer or the clocks differ
// too much.
func (s *Store) CheckNonce(ctx context.Context, scope, nonce string, until time.Time) error {
	if err := s.openLate(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	key, group := s.key(scope, nonce)
	sent := s.cfg.Clock()
	margin := 2 * s.cfg.MaxClockSkew
	ttl := max(until.Sub(sent)+margin, time.Second)
	res, err := check.Run(ctx, s.client, []string{s.marker(group), key},
		ttl.Milliseconds(), until.UnixMilli(), (s.cfg.Window + margin).Milliseconds()).Int64Slice()
	if err != nil {
		return fmt.Errorf("redisstore: %w: %w", replay.ErrUnavailable, err)
	}
	if len(res) != 2 {
		return fmt.Errorf("redisstore: %w: unexpected answer %v", replay.ErrUnavailable, res)
	}
	if err := s.checkSkew(sent, s.cfg.Clock(), res[1]); err != nil {
		return err
	}
	switch res[0] {
	case 1:
		return nil
	case 2:
		return fmt.Errorf("redisstore: nonce reused in its validity window: %w", replay.ErrReplay)
	case 3:
		return ErrSignedBeforeLoss
	}
	return fmt.Errorf("redisstore: %w: unexpected verdict %d", replay.ErrUnavailable, res[0])
}

// openLate opens a store whose Redis did not answer at New; any failure
// refuses the check.
func (s *Store) openLate(ctx context.Context) error {
	err := s.open(ctx)
	if err != nil && !errors.Is(err, replay.ErrUnavailable) {
		return fmt.Errorf("%w: %w", replay.ErrUnavailable, err)
	}
	return err
}

// checkSkew fails when Redis's time, read between sent and received,
// lies further than MaxClockSkew from this host's at that moment.
func (s *Store) checkSkew(sent, received time.Time, redisMs int64) error {
	mid := sent.Add(received.Sub(sent) / 2)
	skew := time.UnixMilli(redisMs).Sub(mid)
	bound := s.cfg.MaxClockSkew + received.Sub(sent)/2 + time.Millisecond
	if skew > bound || -skew > bound {
		return fmt.Errorf("redisstore: %w: this host's clock is %s from Redis's, beyond %s", replay.ErrUnavailable,
			(-skew).Round(time.Millisecond), s.cfg.MaxClockSkew)
	}
	return nil
}

// Ready reports whether a check would be answered now: Redis answers
// within Timeout and the clocks agree within MaxClockSkew.
func (s *Store) Ready(ctx context.Context) error {
	if err := s.openLate(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	sent := s.cfg.Clock()
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("redisstore: %w: %w", replay.ErrUnavailable, err)
	}
	return s.checkSkew(sent, s.cfg.Clock(), t.UnixMilli())
}

// Close closes the connections to Redis.
func (s *Store) Close() error { return s.client.Close() }

// key returns the nonce's key and its group. The key holds a SHA-256 of
// the pair, not the pair: callers choose nonces, and a fixed-size key
// keeps their length and bytes out of Redis.
func (s *Store) key(scope, nonce string) (string, int) {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(scope)))])
	h.Write([]byte(scope))
	h.Write([]byte(nonce))
	sum := h.Sum(nil)
	group := int(binary.BigEndian.Uint16(sum) % groups)
	return s.prefix(group) + base64.RawURLEncoding.EncodeToString(sum[2:26]), group
}

// marker is the key of a group's loss marker.
func (s *Store) marker(group int) string { return s.prefix(group) + "lost" }

// prefix is the keys' start in a group: its hash tag keeps a nonce and
// its marker on one Cluster slot.
func (s *Store) prefix(group int) string { return s.cfg.Prefix + "{" + strconv.Itoa(group) + "}:" }

// newClient connects to the deployment raw names, in one of three forms
// (go-redis's URL parsers):
//
//   - redis://[user:password@]host:port[/db], rediss:// for TLS, or
//     unix:///path: one server.
//   - redis://sentinel:26379?master_name=mymaster[&addr=sentinel2:26379]:
//     Sentinel, which names the current primary.
//   - redis://node1:6379?addr=node2:6379[&addr=…]: Cluster, from two seed
//     nodes or more.
//
// Query parameters set go-redis's options (dial_timeout, read_timeout,
// pool_size, …).
func newClient(raw string) (redis.UniversalClient, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("redisstore: the Redis URL does not parse") // its error would quote a password
	}
	switch q := u.Query(); {
	case q.Has("master_name"):
		o, err := redis.ParseFailoverURL(raw)
		if err != nil {
			return nil, fmt.Errorf("redisstore: Sentinel URL: %w", err)
		}
		return redis.NewFailoverClient(o), nil
	case q.Has("addr"):
		o, err := redis.ParseClusterURL(raw)
		if err != nil {
			return nil, fmt.Errorf("redisstore: Cluster URL: %w", err)
		}
		return redis.NewClusterClient(o), nil
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	return redis.NewClient(o), nil
}
