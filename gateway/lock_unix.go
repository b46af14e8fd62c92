//go:build unix

package gateway

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockNonces takes an exclusive lock on dir's nonce state for as long as
// the gateway lives (the kernel drops it when the process ends, however
// it ends): two gateways sharing one horizon and snapshot would each take
// the other's nonces for its own.
func lockNonces(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, nonceLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errNoncesLocked
		}
		return nil, fmt.Errorf("gateway: locking %s: %w", nonceLockFile, err)
	}
	return func() { f.Close() }, nil
}
