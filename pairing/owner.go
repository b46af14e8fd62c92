package pairing

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/idnhq/idn/approval"
)

// OwnerKeysFile is the file of a gateway's Files where a paired gateway
// pins its owner's passkeys (package approval's Keys). A fleet's Files
// are shared, so its replicas pin the same keys.
const OwnerKeysFile = "owner-passkeys.json"

// OwnerKeys returns the owner's passkeys pinned in files, or nil when
// none are: the gateway then refuses every approval.
func OwnerKeys(files Files) (*approval.Keys, error) {
	b, err := files.ReadFile(OwnerKeysFile)
	if errors.Is(err, fs.ErrNotExist) {
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
func pinOwnerKeys(files Files, raw json.RawMessage, newPairing bool) error {
	if len(raw) == 0 {
		return nil
	}
	if !newPairing {
		if _, err := files.ReadFile(OwnerKeysFile); err == nil {
			return nil
		}
	}
	var k approval.Keys
	if err := json.Unmarshal(raw, &k); err != nil {
		return fmt.Errorf("pairing: owner_keys: %w", err)
	}
	b, _ := json.MarshalIndent(k, "", "  ")
	return files.WriteFile(OwnerKeysFile, append(b, '\n'))
}
