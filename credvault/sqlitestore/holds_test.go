package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/approval/holdtest"
	"github.com/idnhq/idn/credvault/sqlitestore"
)

// TestHoldContract runs the hold contract, each handle a process of its
// own on one file.
func TestHoldContract(t *testing.T) {
	t.Parallel()
	holdtest.Run(t, func(t *testing.T) func(*testing.T) approval.Store {
		path := filepath.Join(t.TempDir(), sqlitestore.DefaultFileName)
		return func(t *testing.T) approval.Store {
			st, err := sqlitestore.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st.Holds()
		}
	})
}
