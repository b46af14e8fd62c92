package pairing

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/pairing/pairwire"
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
// ones only at a new pairing: afterwards only the owner's signed
// KeysUpdate changes them, so the control plane cannot swap in a key of
// its own making.
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

// updateOwnerKeys replaces the pinned keys by those of a signed
// approval.KeysUpdate that the pinned keys themselves accept, in one
// atomic write. A refused update leaves the pinned keys as they are.
func updateOwnerKeys(files Files, raw json.RawMessage, gatewayID string, now time.Time) (*approval.Keys, error) {
	var u approval.KeysUpdate
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %w", approval.ErrKeysUpdate, err)
	}
	pinned, err := OwnerKeys(files)
	if err != nil {
		return nil, err
	}
	next, err := pinned.Apply(&u, gatewayID, now)
	if err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(next, "", "  ")
	if err := files.WriteFile(OwnerKeysFile, append(b, '\n')); err != nil {
		return nil, fmt.Errorf("pairing: %w", err)
	}
	return next, nil
}

// pinnedAlready reports whether raw's key set is the pinned one: each
// reconnect brings the latest update, which is no news once applied.
func pinnedAlready(files Files, raw json.RawMessage) bool {
	var u approval.KeysUpdate
	pinned, err := OwnerKeys(files)
	return err == nil && pinned != nil && json.Unmarshal(raw, &u) == nil && approval.KeysDigest(pinned) == approval.KeysDigest(&u.Keys)
}

// ownerKeysUpdate answers owner_keys.update: it applies the update under
// the client's lock, so two updates cannot both read the same pinned set.
func (c *Client) ownerKeysUpdate(gatewayID string, raw json.RawMessage) (any, *rpcError) {
	if len(raw) == 0 {
		return nil, invalidParams("update is required")
	}
	c.mu.Lock()
	next, err := updateOwnerKeys(c.cfg.Files, raw, gatewayID, time.Now())
	c.mu.Unlock()
	if errors.Is(err, approval.ErrKeysUpdate) {
		c.log.Warn("pairing: the owner's key-set update was refused; the pinned passkeys stay", "err", err)
		return nil, invalidParams(err.Error())
	}
	if err != nil {
		c.log.Error("pairing: the owner's key-set update was not kept", "err", err)
		return nil, &rpcError{Code: pairwire.CodeInternalError, Message: "owner keys not kept"}
	}
	c.log.Info("pairing: the owner's passkeys changed", "version", next.Version, "keys", len(next.Keys))
	return map[string]any{"version": next.Version, "keys": len(next.Keys)}, nil
}
