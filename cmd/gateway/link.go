package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/idnhq/idn/pairing"
)

// pairLockFile is locked (flock) by the one process that keeps a data
// directory's pairing link: gateway serve once the gateway is paired, or
// gateway pair. The lock goes with the process, however it ends; the file
// holds the pid of the last process that took it, for pair --status.
const pairLockFile = "pair.lock"

// linkCheckInterval is how often serve looks for a pairing to keep: one
// that gateway pair has just made, or one whose pair process has ended.
const linkCheckInterval = 5 * time.Second

// lockLink takes the link's lock of dir without waiting; ok is false when
// another process holds it.
func lockLink(dir string) (unlock func(), ok bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(filepath.Join(dir, pairLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, true, nil
}

// fleetLocker is a shared store that locks for every replica at once
// (pgstore.Store).
type fleetLocker interface {
	TryLock(ctx context.Context, name string) (unlock func(), ok bool, err error)
}

// fleetLinkLock is the fleet-wide lock of the one process keeping a
// fleet's pairing link.
const fleetLinkLock = "idn-gateway-pairing-link"

// takeLink takes, without waiting, the lock of the one process that keeps
// the pairing link: the fleet's when c.Store locks for the fleet, else the
// data directory's. fleet reports which.
func takeLink(ctx context.Context, c gateway.Config) (unlock func(), ok, fleet bool, err error) {
	if l, isFleet := c.Store.(fleetLocker); isFleet {
		unlock, ok, err = l.TryLock(ctx, fleetLinkLock)
		return unlock, ok, true, err
	}
	unlock, ok, err = lockLink(c.DataDir)
	return unlock, ok, false, err
}

// linkKeeper reports whether a process holds dir's link lock, and its
// pid as the lock file names it (0 when unreadable). The probe takes a
// shared lock for an instant, which at worst delays serve's next look by
// linkCheckInterval.
func linkKeeper(dir string) (pid int, held bool) {
	f, err := os.Open(filepath.Join(dir, pairLockFile))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		return 0, false // closing f releases it
	}
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, _ = strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return pid, true
}

// newLink opens, for gateway pair, a gateway on the data directory c
// describes and its pairing client. The gateway serves no request: it
// checks no signature, so it has no nonce to keep, and a serving gateway
// may hold the directory's nonce state. close releases the gateway.
func newLink(c gateway.Config, name string, logger *slog.Logger) (client *pairing.Client, gw *gateway.Gateway, close func(), err error) {
	c.Logger = logger
	c.InsecureForgetNoncesOnRestart = true
	if gw, err = gateway.New(c); err != nil {
		return nil, nil, nil, err
	}
	if client, err = linkClient(gw, c, name, logger); err != nil {
		gw.Close()
		return nil, nil, nil, err
	}
	return client, gw, func() { gw.Close() }, nil
}

// linkClient is the pairing client of gw, which c configures. The owner's
// RPCs run the operations of gw's admin API, in process.
func linkClient(gw *gateway.Gateway, c gateway.Config, name string, logger *slog.Logger) (*pairing.Client, error) {
	return pairing.New(pairing.Config{
		ControlPlaneURL: c.ControlPlaneURL, Identity: gw.Identity(), Admin: gw.Admin(), Connector: gw.Connector(), Files: gw.PairingFiles(), MasterKey: c.MasterKey,
		Name: name, Version: buildinfo.Version(), Logger: logger,
	})
}

// keepLink keeps the pairing link of a paired gateway for as long as
// gateway serve runs, so that one process (one unit, one container)
// serves both agents and the owner's dashboard. Until the data directory
// holds a pairing, or while a gateway pair process keeps the link, it
// looks again every linkCheckInterval. The client reconnects with backoff
// by itself; a link the owner ended (unpaired) or another process took
// over (the same identity connected elsewhere) is not retried until the
// pairing changes. In a fleet, the pairing is the shared store's, and one
// replica at a time keeps the link (takeLink). Another takes it over
// within linkCheckInterval of its holder's end; a link taken over is
// looked at again. It returns when ctx ends.
func keepLink(ctx context.Context, gw *gateway.Gateway, c gateway.Config, logger *slog.Logger) {
	if c.ControlPlaneURL == "" {
		return
	}
	name, _ := os.Hostname()
	var ended pairing.State // a pairing not to keep again
	var reported string     // the last problem logged, not repeated every check
	report := func(msg string, err error) {
		if s := msg + err.Error(); s != reported {
			reported = s
			logger.Error(msg, "err", err)
		}
	}
	for {
		st, paired, _, err := pairing.StatusOf(gw.PairingFiles())
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			report("pairing: state unreadable; the link is not kept", err)
		}
		if paired && !samePairing(st, ended) {
			unlock, ok, fleet, err := takeLink(ctx, c)
			if err != nil {
				report("pairing: the link is not kept", err)
			}
			if ok {
				err := runLink(ctx, gw, c, name, logger)
				unlock()
				switch {
				case ctx.Err() != nil:
					return
				case fleet && errors.Is(err, pairing.ErrReplaced):
					// The fleet's lock decides who keeps the link; another
					// replica took it while this one's lock was lost.
					logger.Info("pairing: another replica keeps the link", "err", err)
				case errors.Is(err, pairing.ErrUnpaired), errors.Is(err, pairing.ErrReplaced):
					logger.Warn("pairing: link ended; it is kept again once the gateway is paired again (gateway pair)", "err", err)
					ended = st
				case err != nil:
					report("pairing: link failed", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(linkCheckInterval):
		}
	}
}

// runLink keeps the link of the serving gateway gw until ctx ends or
// reconnecting cannot help.
func runLink(ctx context.Context, gw *gateway.Gateway, c gateway.Config, name string, logger *slog.Logger) error {
	client, err := linkClient(gw, c, name, logger)
	if err != nil {
		return err
	}
	logger.Info("pairing: keeping the link to the owner's dashboard", "registry", c.ControlPlaneURL,
		"hpke_key_fingerprint", client.Fingerprint(), "gateway_did", gw.Identity().DID())
	return client.Run(ctx, nil)
}

func samePairing(a, b pairing.State) bool {
	return a.GatewayID == b.GatewayID && a.PairedAt.Equal(b.PairedAt)
}
