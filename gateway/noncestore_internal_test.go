package gateway

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/idnhq/idn/replay"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// waitingStore answers a check only when its context ends, as a store
// whose caller went away sees it.
type waitingStore struct{}

func (waitingStore) CheckNonce(ctx context.Context, _, _ string, _ time.Time) error {
	<-ctx.Done()
	return errors.Join(replay.ErrUnavailable, ctx.Err())
}
func (waitingStore) Ready(context.Context) error { return nil }

// A caller that goes away mid-check is refused, but says nothing of the
// store: it is not counted unavailable, and not logged down.
func TestSharedNoncesCallerGone(t *testing.T) {
	s := newSharedNonces(waitingStore{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.CheckNonce(ctx, "alice", "n", time.Now().Add(time.Minute))
	if _, ok := errors.AsType[nonceStoreUnavailable](err); !ok {
		t.Fatalf("CheckNonce = %v, want a refusal", err)
	}
	if n := testutil.ToFloat64(s.unavailable); n != 0 || s.down.Load() {
		t.Fatalf("counted %v unavailable, down %v; want 0, false", n, s.down.Load())
	}
}
