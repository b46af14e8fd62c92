package credvault

import (
	"context"
	"errors"
	"testing"
)

// The memory store keeps tool pins as the file store does: a second vault
// on it sees them, an unchanged write writes nothing, and they go with
// their connection.
func TestToolPinsInMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &MemoryStore{}
	v := openTestVault(t, st, testKey(t), -1)
	if _, err := v.Create(ctx, httpConn("x"), map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	set := func(b []byte) func([]byte) ([]byte, error) { return func([]byte) ([]byte, error) { return b, nil } }
	if err := v.UpdateToolPins(ctx, "x", set([]byte(`{"tools":{}}`))); err != nil {
		t.Fatal(err)
	}
	gen, _ := st.Generation(ctx)
	if err := v.UpdateToolPins(ctx, "x", set([]byte(`{"tools":{}}`))); err != nil {
		t.Fatal(err)
	}
	if again, _ := st.Generation(ctx); again != gen {
		t.Error("an unchanged write was written")
	}
	failed := errors.New("no")
	if err := v.UpdateToolPins(ctx, "x", func([]byte) ([]byte, error) { return nil, failed }); !errors.Is(err, failed) {
		t.Errorf("fn's error: %v", err)
	}
	other := openTestVault(t, st, testKey(t), -1)
	if got := string(other.ToolPins("x")); got != `{"tools":{}}` {
		t.Errorf("another vault reads %q", got)
	}
	if err := v.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Create(ctx, httpConn("x"), map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	if got := v.ToolPins("x"); got != nil {
		t.Errorf("a connection made again under a deleted one's id has its pins: %s", got)
	}
}
