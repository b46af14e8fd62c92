package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/replay"
)

// TestDamagedHorizonRefusesAllThatMayPredateTheStart: with no snapshot and
// a horizon file that cannot be read, the gateway cannot know what the
// previous process accepted, so it refuses every signature that could
// have been accepted before it started (created up to now + skew), and
// takes those after.
func TestDamagedHorizonRefusesAllThatMayPredateTheStart(t *testing.T) {
	const maxAge, skew = 300 * time.Second, 30 * time.Second
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, content := range []string{"", "idn-replay-horizon-v1 \n", "idn-replay-horizon-v1 17673\x00\n", "garbage"} {
		t.Run(fmt.Sprintf("%q", content), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, NonceHorizonFile), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			store, _ := replay.New(replay.Config{Clock: clock})
			g, err := openNonces(dir, store, clock, maxAge, skew, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer g.close()
			ctx := context.Background()
			if err := g.CheckNonce(ctx, "alice", "signed-now", now.Add(maxAge)); !errors.Is(err, httpsig.ErrReplayDetected) {
				t.Fatalf("a signature that may predate the start: %v", err)
			}
			if err := g.CheckNonce(ctx, "alice", "ahead-by-the-skew", now.Add(skew+maxAge)); !errors.Is(err, httpsig.ErrReplayDetected) {
				t.Fatalf("a signature created now + skew: %v", err)
			}
			if err := g.CheckNonce(ctx, "alice", "after", now.Add(skew+maxAge+time.Second)); err != nil {
				t.Fatalf("a signature created after now + skew: %v", err)
			}
			h, _, err := readHorizon(filepath.Join(dir, NonceHorizonFile))
			if err != nil || h < ceilUnix(now.Add(skew+maxAge+time.Second)) {
				t.Fatalf("horizon rewritten as %d, %v; it must cover what was accepted", h, err)
			}
		})
	}
}

// FuzzParseHorizon: no input panics, and what parses is the one way of
// writing its time.
func FuzzParseHorizon(f *testing.F) {
	f.Add([]byte("idn-replay-horizon-v1 1767323045\n"))
	f.Add([]byte("idn-replay-horizon-v1 -1\n"))
	f.Add([]byte("idn-replay-horizon-v1 +1767323045\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHorizon(b)
		if err != nil {
			return
		}
		if again := fmt.Sprintf("%s%d\n", horizonMagic, h); again != string(b) {
			t.Fatalf("%q parsed as %d, written %q", b, h, again)
		}
	})
}
