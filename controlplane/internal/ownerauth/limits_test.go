package ownerauth

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb/sqldbtest"
)

// TestRateLimitConcurrent: attempts racing on one key are all counted, so
// exactly the allowed number pass (the row is locked, or SQLite's write
// lock serialises them).
func TestRateLimitConcurrent(t *testing.T) {
	t.Parallel()
	for _, engine := range sqldbtest.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			st := store{sqldbtest.Open(t, engine)}
			const n = 12
			passed := make(chan time.Duration, n)
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					wait, err := st.limitAttempt(context.Background(), "signup:192.0.2.1", SignupsPerAddressPerHour, time.Now())
					if err != nil {
						t.Error(err)
					}
					passed <- wait
				})
			}
			wg.Wait()
			close(passed)
			ok := 0
			for wait := range passed {
				if wait == 0 {
					ok++
				}
			}
			if ok != SignupsPerAddressPerHour {
				t.Fatalf("%d attempts passed, want %d", ok, SignupsPerAddressPerHour)
			}
		})
	}
}
