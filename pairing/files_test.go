package pairing_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/idnhq/idn/pairing"
)

// TestDirFiles: CreateFile keeps what is there, WriteFile replaces it,
// nil deletes it, and the file is its owner's alone.
func TestDirFiles(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	f := pairing.DirFiles(dir)
	if _, err := f.ReadFile("x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile of nothing: %v", err)
	}
	for _, v := range []string{"first", "second"} {
		if err := f.CreateFile("x", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := f.ReadFile("x"); string(b) != "first" {
		t.Fatalf("after two creations: %q, want the first kept", b)
	}
	if fi, err := os.Stat(filepath.Join(dir, "x")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode: %v, %v", fi, err)
	}
	if err := f.WriteFile("x", []byte("third")); err != nil {
		t.Fatal(err)
	}
	if b, _ := f.ReadFile("x"); string(b) != "third" {
		t.Fatalf("after WriteFile: %q", b)
	}
	for range 2 {
		if err := f.WriteFile("x", nil); err != nil {
			t.Fatalf("deleting: %v", err)
		}
	}
	if _, err := f.ReadFile("x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after deleting: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}
