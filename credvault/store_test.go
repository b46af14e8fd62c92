package credvault_test

import (
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/storetest"
)

// TestMemoryStoreContract shares one MemoryStore between handles, as
// processes share a file.
func TestMemoryStoreContract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(*testing.T) func(*testing.T) credvault.Store {
		st := &credvault.MemoryStore{}
		return func(*testing.T) credvault.Store { return st }
	})
}
