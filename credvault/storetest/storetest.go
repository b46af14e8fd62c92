// Package storetest is the contract every credvault.Store passes. Records
// read back as written and a failed Update writes nothing. Generation
// moves with every commit, writers on several handles all land, and a
// Vault sees another handle's write within a second. MemoryStore, package
// sqlitestore and package pgstore run it; a store of your own can too.
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) func(*testing.T) credvault.Store {
//			path := filepath.Join(t.TempDir(), "v.db")
//			return func(t *testing.T) credvault.Store { return open(t, path) }
//		})
//	}
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/credvault"
)

// NewStore makes fresh, empty storage for one test and returns how to open
// a handle on it. Each handle stands for one process sharing the storage;
// the function closes what it opens when the test ends.
type NewStore func(t *testing.T) (open func(t *testing.T) credvault.Store)

// Run runs the contract as subtests of t.
func Run(t *testing.T, newStore NewStore) {
	t.Run("RecordsReadBackAsWritten", func(t *testing.T) { recordsReadBack(t, newStore(t)) })
	t.Run("FailedUpdateWritesNothing", func(t *testing.T) { failedUpdate(t, newStore(t)) })
	t.Run("DeletesPersist", func(t *testing.T) { deletesPersist(t, newStore(t)) })
	t.Run("BlobsReadBackAsWritten", func(t *testing.T) { blobsReadBack(t, newStore(t)) })
	t.Run("ToolPinsReadBackAndGoWithTheirConnection", func(t *testing.T) { toolPinsReadBack(t, newStore(t)) })
	t.Run("GenerationMovesWithCommits", func(t *testing.T) { generationMoves(t, newStore(t)) })
	t.Run("ConcurrentWritersAllLand", func(t *testing.T) { concurrentWriters(t, newStore(t)) })
	t.Run("VaultSeesOtherHandleWithinOneSecond", func(t *testing.T) { seesOther(t, newStore(t), 0) })
	t.Run("NotifierWakesVaultWithoutPolling", func(t *testing.T) { notifierWakes(t, newStore(t)) })
}

// Key is the master key of the contract's vaults.
func Key(t testing.TB) credvault.MasterKey {
	t.Helper()
	k, err := credvault.ParseMasterKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Conn is an HTTP connection of the contract, bearer token from secret
// "token".
func Conn(id string) *credvault.Connection {
	return &credvault.Connection{ID: id, Name: "GitHub", BaseURL: "https://api.github.com", AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}
}

// OpenVault opens a Vault on st that accepts any extension, closed when
// the test ends.
func OpenVault(t testing.TB, st credvault.Store, poll time.Duration) *credvault.Vault {
	t.Helper()
	v, err := credvault.New(context.Background(), credvault.Config{Store: st, MasterKey: Key(t), PollInterval: poll,
		Extensions: credvault.Extensions{Check: func(*credvault.Connection) error { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func recordsReadBack(t *testing.T, open func(*testing.T) credvault.Store) {
	ctx := context.Background()
	v := OpenVault(t, open(t), -1)
	c := Conn("x")
	c.AllowUpstreamCookies = true
	c.ApprovalRoutes = []string{"POST /v1/payments"}
	c.ApprovalSubjects = map[string]approval.Rules{"alice": {Routes: []string{"DELETE /v1/repos/*"}}, "Bob Smith": {Routes: []string{"* /admin/*"}}}
	c.Extensions = map[string]json.RawMessage{"z_list": json.RawMessage(`["a","b"]`), "a_obj": json.RawMessage(`{"k":1}`)}
	if _, err := v.Create(ctx, c, map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.PutVariable(ctx, "K", "variable-value", "alice"); err != nil {
		t.Fatal(err)
	}
	again := OpenVault(t, open(t), -1)
	got, ok := again.Lookup("x")
	if !ok {
		t.Fatal("connection lost on reopening")
	}
	if !got.Connection.AllowUpstreamCookies || !reflect.DeepEqual(got.Connection.Extensions, c.Extensions) ||
		!reflect.DeepEqual(got.Connection.ApprovalRoutes, c.ApprovalRoutes) || !reflect.DeepEqual(got.Connection.ApprovalSubjects, c.ApprovalSubjects) {
		t.Errorf("reopened connection = %+v", got.Connection)
	}
	if s, err := got.Secret(); err != nil || s != "tok-secret-1" {
		t.Errorf("reopened secret = %q, %v", s, err)
	}
	if vars := again.Variables(); len(vars) != 1 || vars[0].Key != "K" || vars[0].CreatedBySubject != "alice" || vars[0].Version != 1 {
		t.Errorf("reopened variables = %+v", vars)
	}
	first, _ := v.Connection("x")
	if second, _ := again.Connection("x"); !reflect.DeepEqual(first, second) {
		t.Errorf("reopened connection differs:\n got %+v\nwant %+v", second, first)
	}
}

func failedUpdate(t *testing.T, open func(*testing.T) credvault.Store) {
	ctx := context.Background()
	st := open(t)
	v := OpenVault(t, st, -1)
	if _, err := v.Create(ctx, Conn("kept"), map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	err := st.Update(ctx, func(r *credvault.Records) error {
		delete(r.Connections, "kept")
		r.Variables["NEW"] = &credvault.VariableRecord{Variable: credvault.Variable{Key: "NEW", Version: 1}, SealedValue: []byte("x")}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("Update = %v, want fn's error unchanged", err)
	}
	recs, err := open(t).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := recs.Connections["kept"]; !ok || len(recs.Variables) != 0 {
		t.Fatalf("a failed Update wrote: %d connections, %d variables", len(recs.Connections), len(recs.Variables))
	}
}

func deletesPersist(t *testing.T, open func(*testing.T) credvault.Store) {
	ctx := context.Background()
	v := OpenVault(t, open(t), -1)
	v.Create(ctx, Conn("a"), map[string]string{"token": "tok-secret-1"})
	v.Create(ctx, Conn("b"), map[string]string{"token": "tok-secret-2"})
	v.PutVariable(ctx, "K", "variable-value", "")
	if err := v.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := v.DeleteVariable(ctx, "K", false); err != nil {
		t.Fatal(err)
	}
	again := OpenVault(t, open(t), -1)
	if _, ok := again.Lookup("a"); ok {
		t.Error("deleted connection came back")
	}
	if _, ok := again.Lookup("b"); !ok {
		t.Error("kept connection lost")
	}
	if vars := again.Variables(); len(vars) != 0 {
		t.Errorf("deleted variable came back: %+v", vars)
	}
}

func blobsReadBack(t *testing.T, open func(*testing.T) credvault.Store) {
	ctx := context.Background()
	v := OpenVault(t, open(t), -1)
	for name, value := range map[string]string{"kept": "first value", "dropped": "other value"} {
		if err := v.PutBlob(ctx, name, []byte(value), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.PutBlob(ctx, "kept", []byte("second value"), true); err != nil {
		t.Fatal(err)
	}
	if err := v.PutBlob(ctx, "dropped", nil, false); err != nil {
		t.Fatal(err)
	}
	again := OpenVault(t, open(t), -1)
	if b, err := again.Blob("kept"); err != nil || string(b) != "first value" {
		t.Errorf("reopened blob = %q, %v; want the first value, kept by an ifAbsent write", b, err)
	}
	if _, err := again.Blob("dropped"); !errors.Is(err, credvault.ErrBlobNotFound) {
		t.Errorf("deleted blob: %v, want ErrBlobNotFound", err)
	}
	if vars, conns := again.Variables(), again.Connections(); len(vars)+len(conns) != 0 {
		t.Errorf("blobs show as records: %d variables, %d connections", len(vars), len(conns))
	}
}

func toolPinsReadBack(t *testing.T, open func(*testing.T) credvault.Store) {
	ctx := context.Background()
	v := OpenVault(t, open(t), -1)
	if _, err := v.Create(ctx, Conn("x"), map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	pins := []byte(`{"tools":{"search":"sha256:00"}}`)
	if err := v.UpdateToolPins(ctx, "x", func([]byte) ([]byte, error) { return pins, nil }); err != nil {
		t.Fatal(err)
	}
	again := OpenVault(t, open(t), -1)
	if got := again.ToolPins("x"); string(got) != string(pins) {
		t.Errorf("reopened tool pins = %q, want %q", got, pins)
	}
	if err := again.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if got := OpenVault(t, open(t), -1).ToolPins("x"); got != nil {
		t.Errorf("tool pins outlived their connection: %q", got)
	}
}

func generationMoves(t *testing.T, open func(*testing.T) credvault.Store) {
	ctx := context.Background()
	watcher, writer := open(t), open(t)
	before, err := watcher.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.Update(ctx, func(r *credvault.Records) error { r.KeyCheck = []byte("check"); return nil }); err != nil {
		t.Fatal(err)
	}
	after, err := watcher.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatalf("Generation stayed %d across another handle's commit", after)
	}
}

func concurrentWriters(t *testing.T, open func(*testing.T) credvault.Store) {
	a, b := OpenVault(t, open(t), -1), OpenVault(t, open(t), -1)
	const n = 25
	errs := make(chan error, 2*n)
	for _, w := range []struct {
		v      *credvault.Vault
		prefix string
	}{{a, "a"}, {b, "b"}} {
		go func() {
			for i := range n {
				_, err := w.v.Create(context.Background(), Conn(fmt.Sprintf("%s-%d", w.prefix, i)), map[string]string{"token": "tok-secret-1"})
				errs <- err
			}
		}()
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := len(OpenVault(t, open(t), -1).Connections()); got != 2*n {
		t.Fatalf("%d connections stored, want %d", got, 2*n)
	}
}

// seesOther writes through one handle and waits for a Vault on another
// to show the write, as a running gateway shows another replica's.
func seesOther(t *testing.T, open func(*testing.T) credvault.Store, poll time.Duration) {
	reader := OpenVault(t, open(t), poll)
	writer := OpenVault(t, open(t), -1)
	start := time.Now()
	if _, err := writer.Create(context.Background(), Conn("fresh"), map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	if !Eventually(time.Second, func() bool { _, ok := reader.Lookup("fresh"); return ok }) {
		t.Fatal("write by another handle not visible within one second")
	}
	t.Logf("visible after %v", time.Since(start))
}

// notifierWakes checks, for a store that is a credvault.Notifier, that
// its notice alone (the Vault polls once an hour) brings another
// handle's write within a second.
func notifierWakes(t *testing.T, open func(*testing.T) credvault.Store) {
	st := open(t)
	if _, ok := st.(credvault.Notifier); !ok {
		t.Skip("the store is not a credvault.Notifier")
	}
	reader := OpenVault(t, st, time.Hour)
	writer := OpenVault(t, open(t), -1)
	if _, _, err := writer.PutVariable(context.Background(), "FRESH", "variable-value", ""); err != nil {
		t.Fatal(err)
	}
	if !Eventually(time.Second, func() bool { return len(reader.Variables()) == 1 }) {
		t.Fatal("another handle's write not visible within one second on the store's notice alone")
	}
}

// Eventually reports whether cond holds within d, checking it every
// few milliseconds: the Vault has no hook that reports a reload.
func Eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
