package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/pgstore"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/envconf"
	"github.com/idnhq/idn/pairing"
)

func init() {
	register(&command{name: "pair", summary: "pair with an owner's dashboard and stay connected (--daemon, --status, --stop)",
		run: runPair, vars: serveVars})
}

// Files of a running pair process in the data directory.
const (
	pairPIDFile = "pair.pid"
	pairLogFile = "pair.log"
)

// runPair completes a pairing session (or, once paired, reconnects) and
// keeps the gateway connected to the control plane, serving the owner's
// RPCs on the local store that `gateway serve` uses. It reads the same
// variables as serve, since it acts on the same store with the same
// identity.
func runPair(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("pair")
	session := fs.String("session-id", "", "pairing session id, as the dashboard shows it")
	code := fs.String("pair-code", "", "one-time pairing code, as the dashboard shows it")
	namespace := fs.String("namespace", "", "the owner's namespace the session belongs to (a session of another namespace is refused)")
	host, _ := os.Hostname()
	name := fs.String("name", host, "name shown in the dashboard")
	daemon := fs.Bool("daemon", false, "run in the background: pid and log files in the data directory")
	status := fs.Bool("status", false, "show the pairing, the HPKE key fingerprint and what keeps the link (a pair process or gateway serve)")
	stop := fs.Bool("stop", false, "stop the background pair process")
	if err := parseFlags(env, fs, "[--session-id ID --pair-code CODE --namespace NS] [--name NAME] [--daemon | --status | --stop]", args); err != nil {
		return err
	}
	modes := 0
	for _, m := range []bool{*daemon, *status, *stop} {
		if m {
			modes++
		}
	}
	if modes > 1 {
		return usagef("--daemon, --status and --stop exclude each other")
	}
	if (*session == "") != (*code == "") {
		return usagef("--session-id and --pair-code go together")
	}
	if *status || *stop {
		r := envconf.New(env.getenv)
		dir := r.String("GATEWAY_DATA_DIR", "", dataDirDoc)
		if dir == "" {
			var err error
			if dir, err = defaultDataDir(env.getenv); err != nil {
				return err
			}
		}
		if *status && env.getenv("GATEWAY_DATABASE_URL") != "" {
			return fleetPairStatus(ctx, env, fs)
		}
		if *status {
			return pairStatus(env, dir)
		}
		return pairStop(env, dir)
	}

	r := envconf.New(env.getenv)
	s := readServe(r, env.getenv, env.environ, flagString(fs, "master-key"))
	if s.gateway.ControlPlaneURL == "" {
		r.Problemf("IDN_REGISTRY_URL is required: the control plane to pair with")
	}
	if err := r.Err(); err != nil {
		return err
	}
	if pid, ok := runningPair(s.gateway.DataDir); ok {
		return fmt.Errorf("a pair process already runs for %s (pid %d); stop it with gateway pair --stop", s.gateway.DataDir, pid)
	}
	c := s.gateway
	if s.databaseURL != "" {
		st, closeStore, err := openStore(ctx, "", s.databaseURL)
		if err != nil {
			return err
		}
		defer closeStore()
		c.Store = st
	}
	unlock, ok, fleet, err := takeLink(ctx, c)
	if err != nil {
		return err
	}
	if !ok {
		if fleet {
			return errors.New("the fleet's pairing link is kept by another process (a replica's gateway serve, once paired, keeps it); " +
				"the fleet pairs once: unpair it from the dashboard to pair it again")
		}
		return fmt.Errorf("the pairing link of %s is kept by another process (gateway serve, once paired, keeps it); "+
			"stop that process to pair again", c.DataDir)
	}
	if *daemon {
		unlock() // the background process takes it
		return pairDaemon(env, c.DataDir, args)
	}
	defer unlock()
	logger := s.log.Logger(env.stderr)
	client, gw, closeLink, err := newLink(c, *name, logger)
	if err != nil {
		return err
	}
	defer closeLink()
	// The owner's tool pin decisions made over this link are reported
	// from here: this process is not serving.
	reports, stopReports := context.WithCancel(ctx)
	reported := make(chan struct{})
	go func() { gw.RunReports(reports); close(reported) }()
	defer func() { stopReports(); <-reported }()
	if err := writeFileAtomic(filepath.Join(c.DataDir, pairPIDFile), []byte(strconv.Itoa(os.Getpid())+"\n")); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(c.DataDir, pairPIDFile))
	var p *pairing.Pairing
	if *session != "" {
		p = &pairing.Pairing{SessionID: *session, Code: *code, Namespace: *namespace}
	} else if _, ok := client.State(); !ok {
		return usagef("this gateway is not paired yet: pass --session-id, --pair-code and --namespace from the dashboard")
	}
	logger.Info("pairing: connecting", "registry", c.ControlPlaneURL, "hpke_key_fingerprint", client.Fingerprint(), "gateway_did", gw.Identity().DID())
	return client.Run(ctx, p)
}

// pairDaemon starts this command again in the background, detached, with
// its output appended to the log file; the child writes its pid file.
func pairDaemon(env *cliEnv, dir string, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(dir, pairLogFile)
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	childArgs := append([]string{"pair"}, slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		return a == "--daemon" || a == "-daemon" || a == "--daemon=true" || a == "-daemon=true"
	})...)
	cmd := exec.Command(exe, childArgs...)
	cmd.Env = env.environ
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	// The child writes the pid file once it has read its settings; wait
	// for it so a mistake is reported here, not only in the log.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got, ok := runningPair(dir); ok && got == pid {
			fmt.Fprintf(env.stdout, "gateway pair running in the background (pid %d); log: %s\n", pid, logPath)
			return nil
		}
		if syscall.Kill(pid, 0) != nil {
			return fmt.Errorf("the background pair process exited; see %s", logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the background pair process (pid %d) did not start in time; see %s", pid, logPath)
}

// runningPair reads the pid file and reports a live process.
func runningPair(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, pairPIDFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	return pid, true
}

func pairStatus(env *cliEnv, dir string) error {
	st, paired, fp, err := pairing.Status(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	w := env.stdout
	if fp != "" {
		fmt.Fprintf(w, "hpke key fingerprint: %s\n", fp)
	}
	if paired {
		fmt.Fprintf(w, "paired: gateway %s of namespace %s at %s (since %s)\n", st.GatewayID, st.Namespace, st.ControlPlaneURL,
			st.PairedAt.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "paired: no")
	}
	pid, pairRuns := runningPair(dir)
	keeper, held := linkKeeper(dir)
	switch {
	case pairRuns:
		fmt.Fprintf(w, "running: yes (pid %d, log %s)\n", pid, filepath.Join(dir, pairLogFile))
	case held:
		// gateway serve keeps the link of a paired gateway itself.
		fmt.Fprintf(w, "running: yes, in gateway serve (pid %d), which keeps the link\n", keeper)
	default:
		fmt.Fprintln(w, "running: no")
	}
	return nil
}

// fleetPairStatus is --status for a fleet: the pairing its shared store
// holds (opened with the master key), and whether a replica keeps the
// link.
func fleetPairStatus(ctx context.Context, env *cliEnv, fs *flag.FlagSet) error {
	r := envconf.New(env.getenv)
	_, key, databaseURL := readStore(r, env.getenv, flagString(fs, "master-key"))
	if err := r.Err(); err != nil {
		return err
	}
	st, err := pgstore.Open(ctx, pgstore.Config{URL: databaseURL})
	if err != nil {
		return err
	}
	defer st.Close()
	v, err := credvault.New(ctx, credvault.Config{Store: st, MasterKey: key, PollInterval: -1, Extensions: gateway.VaultExtensions()})
	if err != nil {
		return err
	}
	defer v.Close()
	s, paired, fp, err := pairing.StatusOf(gateway.SharedPairingFiles(v))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	w := env.stdout
	if fp != "" {
		fmt.Fprintf(w, "hpke key fingerprint: %s\n", fp)
	}
	if paired {
		fmt.Fprintf(w, "paired: fleet gateway %s of namespace %s at %s (since %s)\n", s.GatewayID, s.Namespace, s.ControlPlaneURL,
			s.PairedAt.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "paired: no")
	}
	unlock, free, err := st.TryLock(ctx, fleetLinkLock)
	switch {
	case err != nil:
		return err
	case free:
		unlock()
		fmt.Fprintln(w, "running: no")
	default:
		fmt.Fprintln(w, "running: yes, on one process of the fleet (a replica's gateway serve, or gateway pair)")
	}
	return nil
}

func pairStop(env *cliEnv, dir string) error {
	pid, ok := runningPair(dir)
	if !ok {
		fmt.Fprintln(env.stdout, "no pair process is running")
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop pid %d: %w", pid, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			os.Remove(filepath.Join(dir, pairPIDFile))
			fmt.Fprintf(env.stdout, "stopped the pair process (pid %d)\n", pid)
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the pair process (pid %d) did not stop within 15 s", pid)
}

// writeFileAtomic writes path (0600) through a temporary file.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
