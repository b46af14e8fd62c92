package pairing

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idnhq/idn/approval"
)

// OwnerKeysFile is the file in DataDir where a paired gateway pins its
// owner's passkeys (package approval's Keys).
const OwnerKeysFile = "owner-passkeys.json"

// OwnerKeys returns the owner's passkeys pinned in dataDir, or nil when
// none are: the gateway then refuses every approval.
func OwnerKeys(dataDir string) (*approval.Keys, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, OwnerKeysFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pairing: %w", err)
	}
	var k approval.Keys
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("pairing: %s: %w", OwnerKeysFile, err)
	}
	return &k, nil
}

// pinOwnerKeys keeps the keys of a ready message. They replace pinned
// ones only at a new pairing: afterwards the control plane cannot swap
// in a key of its own making.
func pinOwnerKeys(dataDir string, raw json.RawMessage, newPairing bool) error {
	if len(raw) == 0 {
		return nil
	}
	if !newPairing {
		if _, err := os.Stat(filepath.Join(dataDir, OwnerKeysFile)); err == nil {
			return nil
		}
	}
	var k approval.Keys
	if err := json.Unmarshal(raw, &k); err != nil {
		return fmt.Errorf("pairing: owner_keys: %w", err)
	}
	b, _ := json.MarshalIndent(k, "", "  ")
	return writeFile(dataDir, OwnerKeysFile, append(b, '\n'))
}
