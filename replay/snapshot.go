package replay

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/idnhq/idn/internal/heldmem"
)

// A snapshot is what WriteTo writes and ReadFrom reads, little-endian:
//
//	magic   "idn-replay-snapshot-v1\n"
//	secret  16 bytes: the fingerprint key
//	base    int64: unix seconds that expiries count from
//	shards  uint32: how many shards the store had (1 to 32)
//	per shard: uint32 count, then count × (uint64 fingerprint, uint32 expiry)
//	SHA-256 of everything before it
//
// Each fingerprint is listed under the shard that held it: the bits that
// chose the shard are not kept, and ReadFrom needs them to place it.
const snapshotMagic = "idn-replay-snapshot-v1\n"

const entryBytes = 12

// Close stops the store recording nonces: a CheckNonce that begins after
// Close fails with ErrClosed, and every one that succeeded before it is
// in what WriteTo writes next. It is how a clean stop takes an exact
// snapshot. Closing twice is harmless.
func (s *Store) Close() error {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.closed = true
		sh.mu.Unlock()
	}
	return nil
}

// WriteTo writes the store's live nonces and its fingerprint key to w in
// the snapshot format ReadFrom reads; it implements io.WriterTo. It reads
// one shard at a time, so a nonce recorded meanwhile may be missing:
// Close the store first for a complete snapshot. The snapshot holds the
// key that keeps nonce fingerprints unpredictable: keep it private (the
// gateway writes it with mode 0600).
func (s *Store) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(cw, h), 64<<10)
	hdr := append([]byte(snapshotMagic), s.secret[:]...)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(s.base))
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(s.shards)))
	bw.Write(hdr)
	var entries []byte
	for i := range s.shards {
		entries = s.shards[i].live(entries[:0], s.since(s.clock().Unix()))
		bw.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(entries)/entryBytes)))
		bw.Write(entries)
	}
	if err := bw.Flush(); err != nil {
		return cw.n, fmt.Errorf("replay: writing snapshot: %w", err)
	}
	if _, err := cw.Write(h.Sum(nil)); err != nil {
		return cw.n, fmt.Errorf("replay: writing snapshot: %w", err)
	}
	return cw.n, nil
}

// live appends sh's fingerprints live at now, with their expiries, to b.
func (sh *shard) live(b []byte, now uint32) []byte {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for i := range sh.buckets {
		bk := &sh.buckets[i]
		for j, exp := range bk.exp {
			if exp > now {
				b = binary.LittleEndian.AppendUint64(b, bk.fp[j])
				b = binary.LittleEndian.AppendUint32(b, exp)
			}
		}
	}
	return b
}

// ReadFrom loads a snapshot written by WriteTo into s, which must not
// have been used yet: s takes the snapshot's fingerprint key, so call
// ReadFrom before the first CheckNonce. Nonces already expired are
// dropped. The store may have another MaxBytes, and so another number of
// shards, than the one that wrote the snapshot. It implements
// io.ReaderFrom and reads r to its end.
//
// A snapshot that is truncated, altered, followed by more bytes or too
// large for s is refused with an error, and s is left as it was: empty,
// with its own key. A caller that cannot load one must not take the empty
// store for a complete one (the gateway then refuses what the previous
// process may have accepted instead).
func (s *Store) ReadFrom(r io.Reader) (int64, error) {
	if s.Len() > 0 || s.shards[0].isClosed() {
		return 0, errors.New("replay: ReadFrom needs a store not used yet")
	}
	own := s.secret
	cr := &countingReader{r: r}
	err := s.load(cr)
	if err != nil {
		s.secret = own
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			clear(sh.buckets)
			sh.mu.Unlock()
		}
		return cr.n, fmt.Errorf("replay: snapshot: %w", err)
	}
	return cr.n, nil
}

func (s *Store) load(r io.Reader) error {
	h := sha256.New()
	br := bufio.NewReaderSize(r, 64<<10)
	in := io.TeeReader(br, h)
	hdr := make([]byte, len(snapshotMagic)+len(s.secret)+8+4)
	if _, err := io.ReadFull(in, hdr); err != nil {
		return truncated(err)
	}
	if !bytes.HasPrefix(hdr, []byte(snapshotMagic)) {
		return errors.New("not a snapshot of this version")
	}
	rest := hdr[len(snapshotMagic):]
	copy(s.secret[:], rest)
	base := int64(binary.LittleEndian.Uint64(rest[16:]))
	n := binary.LittleEndian.Uint32(rest[24:])
	if n == 0 || n > maxShards {
		return fmt.Errorf("%d shards", n)
	}
	now := s.clock().Unix()
	var entry [entryBytes]byte
	for i := range uint64(n) {
		if _, err := io.ReadFull(in, entry[:4]); err != nil {
			return truncated(err)
		}
		// The shard bits of a fingerprint in old shard i lie in [lo, hi];
		// it goes to every shard of s those bits can pick.
		lo, hi := ceilDiv(int64(i<<32), int64(n)), ceilDiv(int64((i+1)<<32), int64(n))-1
		first, last := fastrange(uint32(lo), len(s.shards)), fastrange(uint32(hi), len(s.shards))
		for range binary.LittleEndian.Uint32(entry[:4]) {
			if _, err := io.ReadFull(in, entry[:]); err != nil {
				return truncated(err)
			}
			fp := binary.LittleEndian.Uint64(entry[:])
			until := base + int64(binary.LittleEndian.Uint32(entry[8:]))
			if until <= now {
				continue
			}
			for j := first; j <= last; j++ {
				if err := s.shards[j].restore(fp, s.since(until), s.since(now), &s.tables); err != nil {
					return err
				}
			}
		}
	}
	sum := h.Sum(nil)
	got := make([]byte, len(sum))
	if _, err := io.ReadFull(br, got); err != nil {
		return truncated(err)
	}
	if !bytes.Equal(got, sum) {
		return errors.New("checksum mismatch: the file is damaged")
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return errors.New("bytes after the checksum")
	}
	return nil
}

// restore puts fp in sh, growing the table (counted in held) if need be.
func (sh *shard) restore(fp uint64, exp, now uint32, held *heldmem.Counter) error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for !sh.insert(fp, exp, now) {
		if !sh.grow(now, held) {
			return fmt.Errorf("more live nonces than MaxBytes holds: %w", ErrFull)
		}
	}
	return nil
}

func (sh *shard) isClosed() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.closed
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("truncated")
	}
	return err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

var (
	_ io.WriterTo   = (*Store)(nil)
	_ io.ReaderFrom = (*Store)(nil)
)
