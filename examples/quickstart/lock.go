package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// lockName is the lock file a running quickstart holds in its data folder.
const lockName = "quickstart.lock"

// folderBusy is lockDir's error while another quickstart holds the folder.
type folderBusy struct{ dir, holder string }

func (e *folderBusy) Error() string {
	return fmt.Sprintf("%s is running with the data folder %s; its printed commands work while it runs. "+
		"Stop it with Ctrl-C first, or give this one its own folder with --dir", e.holder, e.dir)
}

// busyError says which quickstart holds the folder.
func busyError(dir string, lockFile []byte) error {
	holder := "another quickstart"
	if pid := strings.TrimSpace(string(lockFile)); pid != "" {
		holder += " (pid " + pid + ")"
	}
	return &folderBusy{dir: dir, holder: holder}
}

// resetDir removes everything in dir but the lock file, so each run starts
// from a fresh control plane, gateway and agent.
func resetDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == lockName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
