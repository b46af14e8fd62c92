package gateway

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/httpsig"
	"github.com/prometheus/client_golang/prometheus"
)

// NonceStore records the nonces of a fleet of gateways in one place, so
// that a request accepted by one replica is refused as a replay by every
// other, and by itself after a restart. Package replay/redisstore is one,
// on Redis.
//
// CheckNonce records a fresh nonce and returns nil, or fails with an
// error wrapping httpsig.ErrReplayDetected (403 AUTH_REPLAY_DETECTED).
// Any other error refuses the request 503 NONCE_STORE_UNAVAILABLE: a
// store that cannot answer fails closed, never falls back to memory.
// Ready reports whether CheckNonce can answer now, for /health/ready.
type NonceStore interface {
	httpsig.NonceChecker
	Ready(ctx context.Context) error
}

// sharedNonces is the gateway's checker around a NonceStore: it turns
// every failure but a replay into NONCE_STORE_UNAVAILABLE, counts those,
// and logs when the store stops and starts answering.
type sharedNonces struct {
	store       NonceStore
	logger      *slog.Logger
	unavailable prometheus.Counter
	down        atomic.Bool
}

var _ httpsig.NonceChecker = (*sharedNonces)(nil)

func newSharedNonces(store NonceStore, reg prometheus.Registerer, logger *slog.Logger) *sharedNonces {
	s := &sharedNonces{store: store, logger: logger}
	s.unavailable = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "idn_gateway_nonce_store_unavailable_total",
		Help: "Signed requests refused because the shared nonce store could not record their nonce.",
	})
	reg.MustRegister(s.unavailable, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idn_gateway_nonce_store_up",
		Help: "1 while the shared nonce store answers, 0 while signed requests are refused for want of it.",
	}, func() float64 {
		if s.down.Load() {
			return 0
		}
		return 1
	}))
	return s
}

func (s *sharedNonces) CheckNonce(ctx context.Context, scope, nonce string, until time.Time) error {
	err := s.store.CheckNonce(ctx, scope, nonce, until)
	if err == nil || errors.Is(err, httpsig.ErrReplayDetected) {
		s.observe(nil)
		return err
	}
	if ctx.Err() != nil {
		// The caller went away: no news of the store.
		return nonceStoreUnavailable{err}
	}
	s.unavailable.Inc()
	s.observe(err)
	return nonceStoreUnavailable{err}
}

// ready is the store's readiness, which also notices a recovery while no
// request comes.
func (s *sharedNonces) ready(ctx context.Context) error {
	err := s.store.Ready(ctx)
	s.observe(err)
	return err
}

// observe logs a change of the store's state, once.
func (s *sharedNonces) observe(err error) {
	if err != nil && !s.down.Swap(true) {
		s.logger.Error("the shared nonce store does not answer; signed requests are refused 503 NONCE_STORE_UNAVAILABLE until it does", "error", err)
	}
	if err == nil && s.down.Swap(false) {
		s.logger.Info("the shared nonce store answers again")
	}
}
