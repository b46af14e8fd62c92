package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/pgstore"
	"github.com/idnhq/idn/credvault/storetest"
	"github.com/jackc/pgx/v5"
)

// testDatabase creates a database of the test's own in the server named by
// IDN_TEST_POSTGRES_URL, dropped when the test ends, and returns its URL.
func testDatabase(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv("IDN_TEST_POSTGRES_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatal("IDN_TEST_POSTGRES_URL is unset but CI=true: PostgreSQL tests must run in CI (see .ci/run)")
		}
		tb.Skip("PostgreSQL tests skipped: IDN_TEST_POSTGRES_URL is unset (bash .ci/run starts a server)")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "credvault_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		admin.Close(ctx)
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

const (
	oneSecond = time.Second
	time1h    = time.Hour // a poll that never comes within a test
	// reconnectSlack is how long past its one-second pause the listener
	// may take to connect again.
	reconnectSlack = 500 * time.Millisecond
)

func open(tb testing.TB, dbURL string) *pgstore.Store {
	tb.Helper()
	st, err := pgstore.Open(context.Background(), pgstore.Config{URL: dbURL, MaxConns: 4})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// TestContract runs the store contract, each handle a replica of its own
// on one database.
func TestContract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) func(*testing.T) credvault.Store {
		dbURL := testDatabase(t)
		return func(t *testing.T) credvault.Store { return open(t, dbURL) }
	})
}

// TestReplicasSeeEachOtherWithinOneSecond writes a connection, a rotation
// and a variable through one replica and waits for another, which polls
// once an hour, to serve each.
func TestReplicasSeeEachOtherWithinOneSecond(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testDatabase(t)
	a := storetest.OpenVault(t, open(t, dbURL), -1)
	b := storetest.OpenVault(t, open(t, dbURL), time1h)
	if _, err := a.Create(ctx, storetest.Conn("github"), map[string]string{"token": "{{GITHUB_TOKEN}}"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.PutVariable(ctx, "GITHUB_TOKEN", "ghp_first_value", ""); err != nil {
		t.Fatal(err)
	}
	if !storetest.Eventually(oneSecond, func() bool { return secretOf(b, "github") == "ghp_first_value" }) {
		t.Fatal("replica b does not serve the connection within one second")
	}
	if _, _, err := a.PutVariable(ctx, "GITHUB_TOKEN", "ghp_second_value", ""); err != nil {
		t.Fatal(err)
	}
	if !storetest.Eventually(oneSecond, func() bool { return secretOf(b, "github") == "ghp_second_value" }) {
		t.Fatal("replica b serves the old variable value past one second")
	}
	if err := a.Delete(ctx, "github"); err != nil {
		t.Fatal(err)
	}
	if !storetest.Eventually(oneSecond, func() bool { _, ok := b.Lookup("github"); return !ok }) {
		t.Fatal("replica b serves a deleted connection past one second")
	}
}

func secretOf(v *credvault.Vault, id string) string {
	r, ok := v.Lookup(id)
	if !ok {
		return ""
	}
	s, _ := r.Secret()
	return s
}

// TestReplicasShareOneMasterKey: a replica with another master key is
// refused, so it cannot write records the others cannot open.
func TestReplicasShareOneMasterKey(t *testing.T) {
	t.Parallel()
	dbURL := testDatabase(t)
	storetest.OpenVault(t, open(t, dbURL), -1)
	other, _ := credvault.GenerateMasterKey()
	_, err := credvault.New(context.Background(), credvault.Config{Store: open(t, dbURL), MasterKey: other, PollInterval: -1})
	if !errors.Is(err, credvault.ErrWrongMasterKey) {
		t.Fatalf("New with another key: %v, want ErrWrongMasterKey", err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	dbURL := testDatabase(t)
	open(t, dbURL)
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "UPDATE credvault_schema SET version = 99"); err != nil {
		t.Fatal(err)
	}
	if st, err := pgstore.Open(context.Background(), pgstore.Config{URL: dbURL}); err == nil {
		st.Close()
		t.Fatal("opened a store from a newer schema")
	}
}

// TestOpenKeepsPasswordOutOfErrors: a URL pgx cannot parse is refused
// without being repeated.
func TestOpenKeepsPasswordOutOfErrors(t *testing.T) {
	t.Parallel()
	_, err := pgstore.Open(context.Background(), pgstore.Config{URL: "postgres://u:hunter2-secret@host:notaport/db"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Open = %v", err)
	}
}

// TestDatabaseStopped cuts the replica off from PostgreSQL: it keeps
// serving what it loaded, refuses writes with ErrStoreUnavailable, and
// when the database is back, writes land and other replicas' commits
// reach it again.
func TestDatabaseStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testDatabase(t)
	link := newCuttableLink(t, dbURL)
	v := storetest.OpenVault(t, open(t, link.url), time1h)
	if _, err := v.Create(ctx, storetest.Conn("github"), map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	link.cut()
	if secretOf(v, "github") != "tok-secret-1" {
		t.Fatal("the loaded connection is no longer served")
	}
	_, err := v.Create(ctx, storetest.Conn("other"), map[string]string{"token": "tok-secret-2"})
	if !errors.Is(err, credvault.ErrStoreUnavailable) {
		t.Fatalf("write with the database stopped = %v, want ErrStoreUnavailable", err)
	}
	if _, err := v.Rotate(ctx, "github", credvault.Rotation{Secrets: map[string]*string{"token": new("tok-secret-3")}}); !errors.Is(err, credvault.ErrStoreUnavailable) {
		t.Fatalf("rotation with the database stopped = %v, want ErrStoreUnavailable", err)
	}
	if secretOf(v, "github") != "tok-secret-1" {
		t.Fatal("a refused rotation changed what is served")
	}
	link.restore()
	if _, err := v.Create(ctx, storetest.Conn("other"), map[string]string{"token": "tok-secret-2"}); err != nil {
		t.Fatalf("write after the database is back: %v", err)
	}
	w := storetest.OpenVault(t, open(t, dbURL), -1)
	if _, _, err := w.PutVariable(ctx, "AFTER", "variable-value", ""); err != nil {
		t.Fatal(err)
	}
	// The listener reconnects within a second and catches up.
	if !storetest.Eventually(2*oneSecond+reconnectSlack, func() bool { return len(v.Variables()) == 1 }) {
		t.Fatal("another replica's commit does not reach the reconnected replica")
	}
}

// cuttableLink forwards TCP to PostgreSQL until cut, which closes every
// connection and refuses new ones, as a stopped server does.
type cuttableLink struct {
	url    string
	target string
	ln     net.Listener

	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func newCuttableLink(t *testing.T, dbURL string) *cuttableLink {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &cuttableLink{target: u.Host, ln: ln}
	u.Host = ln.Addr().String()
	l.url = u.String()
	t.Cleanup(func() { ln.Close(); l.cut() })
	go l.accept()
	return l
}

func (l *cuttableLink) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		if l.down {
			l.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", l.target)
		if err != nil {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.conns = append(l.conns, c, up)
		l.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}

func (l *cuttableLink) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = true
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

func (l *cuttableLink) restore() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = false
}

// TestTryLockIsFleetWide: one replica at a time holds a lock; when its
// holder lets go, or its connection dies, another takes it.
func TestTryLockIsFleetWide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testDatabase(t)
	link := newCuttableLink(t, dbURL)
	a, b := open(t, link.url), open(t, dbURL)
	unlockA, ok, err := a.TryLock(ctx, "link")
	if err != nil || !ok {
		t.Fatalf("first lock: %v, %v", ok, err)
	}
	if _, ok, err := b.TryLock(ctx, "link"); err != nil || ok {
		t.Fatalf("second replica took a held lock: %v, %v", ok, err)
	}
	if unlockOther, ok, err := b.TryLock(ctx, "other"); err != nil || !ok {
		t.Fatalf("another lock: %v, %v", ok, err)
	} else {
		unlockOther()
	}
	unlockA()
	unlockB, ok, err := b.TryLock(ctx, "link")
	if err != nil || !ok {
		t.Fatalf("lock after its holder let go: %v, %v", ok, err)
	}
	unlockB()
	if _, ok, _ := a.TryLock(ctx, "link"); !ok {
		t.Fatal("a cannot take the lock again")
	}
	link.cut() // a's connection dies with the lock in it
	if !storetest.Eventually(oneSecond, func() bool {
		unlock, ok, _ := b.TryLock(ctx, "link")
		if ok {
			unlock()
		}
		return ok
	}) {
		t.Fatal("the lock of a replica cut off is not released")
	}
}

// TestReplicasStartingTogetherMigrateOnce opens one fresh database from
// several replicas at once: each opens, and the schema is at its version.
func TestReplicasStartingTogetherMigrateOnce(t *testing.T) {
	t.Parallel()
	dbURL := testDatabase(t)
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() {
			st, err := pgstore.Open(context.Background(), pgstore.Config{URL: dbURL, MaxConns: 2})
			if err == nil {
				st.Close()
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Fatalf("a replica starting with others: %v", err)
		}
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows, version int
	if err := conn.QueryRow(context.Background(), "SELECT count(*), max(version) FROM credvault_schema").Scan(&rows, &version); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || version != 3 {
		t.Fatalf("credvault_schema holds %d rows, version %d; want 1 row, version 3 (every migration)", rows, version)
	}
}
