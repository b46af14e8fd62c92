package pgstore_test

import (
	"testing"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/approval/holdtest"
)

// TestHoldContract runs the hold contract, each handle a replica of its
// own on one database.
func TestHoldContract(t *testing.T) {
	t.Parallel()
	holdtest.Run(t, func(t *testing.T) func(*testing.T) approval.Store {
		db := testDatabase(t)
		return func(t *testing.T) approval.Store { return open(t, db).Holds() }
	})
}
