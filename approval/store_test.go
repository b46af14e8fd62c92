package approval_test

import (
	"testing"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/approval/holdtest"
)

// TestMemoryStoreContract: handles of one MemoryStore share it, as
// goroutines of one gateway do.
func TestMemoryStoreContract(t *testing.T) {
	holdtest.Run(t, func(t *testing.T) func(*testing.T) approval.Store {
		st := &approval.MemoryStore{}
		return func(*testing.T) approval.Store { return st }
	})
}
