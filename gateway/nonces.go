package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/replay"
)

// The nonce store is memory. Two files in DataDir (and a lock, so that
// one gateway at a time uses them) keep a restart from
// reopening the replay window (docs/threat-model.md):
//
//   - NonceSnapshotFile, written by Close once nothing more is recorded:
//     the store's live nonces, loaded and removed by the next New. A clean
//     stop costs clients nothing.
//   - NonceHorizonFile, kept while the gateway runs: a time H by which
//     every signature accepted so far has stopped being acceptable (its
//     created + max age, or its expires). H runs nonceLease ahead of the
//     newest signature. A client whose clock is ahead moves it further,
//     written before its request goes on. After a crash there is no
//     snapshot, and the next process refuses every signature that stops
//     being acceptable by H: all the dead process may have accepted, and
//     whatever was signed up to nonceLease after it died.
//
// Working from that end of acceptability, not from created, keeps the
// guard an httpsig.NonceChecker around any store; it costs only signers
// that set an early expires, which are refused a little longer after a
// crash.
const (
	NonceHorizonFile  = "replay-horizon"  // the horizon, in DataDir
	NonceSnapshotFile = "replay-snapshot" // the nonces Close saved, in DataDir

	nonceLockFile = "replay.lock"
	nonceLease    = 2 * time.Second
	horizonMagic  = "idn-replay-horizon-v1 "
)

// errNoncesLocked refuses a second gateway on one DataDir.
var errNoncesLocked = errors.New("gateway: another gateway is using this DataDir's nonce state (" + nonceLockFile + "); give each gateway its own DataDir")

// errSignedBeforeRestart refuses a signature the gateway may have accepted
// before it last stopped without saving its nonces.
var errSignedBeforeRestart = fmt.Errorf("gateway: signed before the gateway restarted without its nonces; sign again: %w", httpsig.ErrReplayDetected)

// nonceGuard is the gateway's httpsig.NonceChecker: the replay store,
// behind the horizon of the process before (before) and its own
// (horizon).
type nonceGuard struct {
	store  *replay.Store
	dir    string
	clock  func() time.Time
	maxAge time.Duration
	logger *slog.Logger

	before  int64        // unix ns: a signature acceptable until no later is refused; 0 for none
	horizon atomic.Int64 // unix s, in NonceHorizonFile: no accepted signature is acceptable after it

	mu      sync.Mutex // one writer of NonceHorizonFile at a time
	failing bool       // the last write of it failed
	unlock  func()
	closed  sync.Once
}

var _ httpsig.NonceChecker = (*nonceGuard)(nil)

// openNonces loads what the previous process left in dir into store
// (unused yet), writes this process's horizon and removes the snapshot.
// Without a usable snapshot, it refuses what the previous process may
// have accepted: up to its horizon, or when that file is damaged, up to
// the furthest any signature seen until now could reach (now + skew +
// maxAge).
func openNonces(dir string, store *replay.Store, clock func() time.Time, maxAge, skew time.Duration, logger *slog.Logger) (_ *nonceGuard, err error) {
	if clock == nil {
		clock = time.Now
	}
	unlock, err := lockNonces(dir)
	if err != nil {
		return nil, err
	}
	g := &nonceGuard{store: store, dir: dir, clock: clock, maxAge: maxAge, logger: logger, unlock: unlock}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	now := clock()
	prev, found, herr := readHorizon(filepath.Join(dir, NonceHorizonFile))
	if herr != nil {
		logger.Error("replay horizon unreadable; refusing every signature that may predate this start", "error", herr)
	}
	loaded, serr := loadSnapshot(filepath.Join(dir, NonceSnapshotFile), store)
	if serr != nil {
		logger.Error("nonce snapshot refused; refusing signatures the previous process may have accepted", "error", serr)
	}
	worst := ceilUnix(now.Add(skew + maxAge))
	next := ceilUnix(now.Add(maxAge + nonceLease))
	if found {
		next = max(next, prev)
	}
	if herr != nil {
		next = max(next, worst)
	}
	switch {
	case loaded:
	case found:
		g.before = prev * 1e9
		if prev < now.Unix() {
			break
		}
		logger.Warn("the gateway stopped without saving its nonces: signatures that may predate the stop are refused (AUTH_REPLAY_DETECTED) until they expire",
			"until", time.Unix(prev, 0).UTC())
	case herr != nil || serr != nil:
		g.before = worst * 1e9
	}
	// The new horizon is on disk before the snapshot goes: a crash in
	// between finds the snapshot, which still holds all that was accepted.
	if err = g.raise(next, next); err != nil {
		return nil, err
	}
	if err = os.Remove(filepath.Join(dir, NonceSnapshotFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("gateway: removing the used nonce snapshot: %w", err)
	}
	if err = syncDir(dir); err != nil {
		return nil, fmt.Errorf("gateway: removing the used nonce snapshot: %w", err)
	}
	return g, nil
}

// CheckNonce refuses a signature the previous process may have accepted,
// moves the horizon past until when it is not already, then records the
// nonce in the store.
func (g *nonceGuard) CheckNonce(ctx context.Context, scope, nonce string, until time.Time) error {
	if until.UnixNano() <= g.before {
		return errSignedBeforeRestart
	}
	if need := ceilUnix(until); need > g.horizon.Load() {
		if err := g.raise(need, need+int64(nonceLease/time.Second)); err != nil {
			return err
		}
	}
	return g.store.CheckNonce(ctx, scope, nonce, until)
}

// run keeps the horizon nonceLease ahead of a signature created now, so
// that a request rarely waits for the disk, until ctx is done.
func (g *nonceGuard) run(ctx context.Context) {
	t := time.NewTicker(nonceLease / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h := ceilUnix(g.clock().Add(g.maxAge + nonceLease))
			_ = g.raise(h, h)
		}
	}
}

// raise writes horizon to when the current one is below need, and
// publishes it once it is on disk.
func (g *nonceGuard) raise(need, to int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if need <= g.horizon.Load() {
		return nil
	}
	err := writeAtomic(g.dir, NonceHorizonFile, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s%d\n", horizonMagic, to)
		return err
	})
	if err != nil {
		if !g.failing {
			g.logger.Error("writing the replay horizon failed; signed requests are refused 503 NONCE_STORE_UNAVAILABLE until it works", "error", err)
		}
		g.failing = true
		return nonceStoreUnavailable{fmt.Errorf("replay horizon not written: %w", err)}
	}
	if g.failing {
		g.logger.Info("writing the replay horizon works again")
	}
	g.failing = false
	g.horizon.Store(to)
	return nil
}

// ready fails while the horizon cannot be written, as every signed
// request is then refused.
func (g *nonceGuard) ready(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failing {
		return fmt.Errorf("the replay horizon cannot be written to %s", g.dir)
	}
	return nil
}

// close stops the store recording, saves its nonces for the next start
// and lets another gateway take the files; later calls do nothing. It
// leaves the horizon file, which the next start still needs if this
// snapshot cannot be read.
func (g *nonceGuard) close() (err error) {
	g.closed.Do(func() { err = g.save() })
	return err
}

func (g *nonceGuard) save() error {
	defer g.unlock()
	g.store.Close()
	err := writeAtomic(g.dir, NonceSnapshotFile, func(w io.Writer) error {
		_, err := g.store.WriteTo(w)
		return err
	})
	if err != nil {
		g.logger.Error("saving the nonces failed; the next start refuses signatures made before this stop", "error", err)
		return fmt.Errorf("gateway: saving the nonces: %w", err)
	}
	return nil
}

// nonceStoreUnavailable is a nonce check refused because the horizon could
// not be written, or the shared store did not answer: 503
// NONCE_STORE_UNAVAILABLE.
type nonceStoreUnavailable struct{ err error }

func (e nonceStoreUnavailable) Error() string      { return "gateway: " + e.err.Error() }
func (e nonceStoreUnavailable) Unwrap() error      { return e.err }
func (e nonceStoreUnavailable) Code() errcode.Code { return errcode.NonceStoreUnavailable }

// readHorizon reads a horizon file: found is false when there is none.
func readHorizon(path string) (h int64, found bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("gateway: %w", err)
	}
	h, err = parseHorizon(b)
	return h, err == nil, err
}

// parseHorizon parses "idn-replay-horizon-v1 <unix seconds>\n".
func parseHorizon(b []byte) (int64, error) {
	rest, ok := bytes.CutPrefix(b, []byte(horizonMagic))
	digits, ok2 := bytes.CutSuffix(rest, []byte("\n"))
	if !ok || !ok2 {
		return 0, fmt.Errorf("gateway: %s is not a horizon file", NonceHorizonFile)
	}
	// One way to write a time: digits, the first not 0.
	if len(digits) == 0 || digits[0] < '1' || digits[0] > '9' {
		return 0, fmt.Errorf("gateway: %s holds no time", NonceHorizonFile)
	}
	h, err := strconv.ParseInt(string(digits), 10, 64)
	if err != nil || h > 1<<40 {
		return 0, fmt.Errorf("gateway: %s holds no time", NonceHorizonFile)
	}
	return h, nil
}

// loadSnapshot loads the snapshot at path into store. It reports false
// with no error when there is none.
func loadSnapshot(path string, store *replay.Store) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("gateway: %w", err)
	}
	defer f.Close()
	if _, err := store.ReadFrom(f); err != nil {
		return false, fmt.Errorf("gateway: %s: %w", NonceSnapshotFile, err)
	}
	return true, nil
}

// writeAtomic replaces dir/name with what write writes, mode 0600: written
// aside, synced, renamed into place, and the directory synced, so a crash
// leaves the old file or the new one, whole.
func writeAtomic(dir, name string, write func(io.Writer) error) (err error) {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 64<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ceilUnix is t in unix seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
