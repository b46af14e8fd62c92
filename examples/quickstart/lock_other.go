//go:build !unix

package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// lockDir creates dir's lock file exclusively and removes it at unlock.
// Without flock a crashed quickstart leaves the file behind; the error says
// which process made it.
func lockDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		holder, _ := os.ReadFile(path)
		return nil, errors.Join(busyError(dir, holder), errors.New("if no quickstart runs, delete "+path))
	}
	if err != nil {
		return nil, err
	}
	_, _ = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	f.Close()
	return func() { os.Remove(path) }, nil
}
