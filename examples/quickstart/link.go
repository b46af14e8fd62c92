package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/idnhq/idn/controlplane"
)

// The link command prints a fresh one-time sign-in link for the
// quickstart running with a data folder, once the first link is used or
// expired: restarting would wipe the folder. It stores the link in the
// running control plane's SQLite database, which takes a second writer
// in turn, and reads the dashboard's address from the file the run left.

// dashboardFile holds, in the data folder, the running dashboard's origin.
const dashboardFile = "dashboard-origin"

// linkUsage is the link command's synopsis.
const linkUsage = "go run ./examples/quickstart link [--dir DIR] [--next PATH]"

func runLink(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("quickstart link", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: %s\n\nPrints a fresh one-time link that opens the dashboard of the quickstart running with DIR.\n\n", linkUsage)
		fs.PrintDefaults()
	}
	dir := fs.String("dir", defaultDir(), "the running quickstart's data folder")
	next := fs.String("next", "/claims", "the dashboard page to open")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if !strings.HasPrefix(*next, "/") || strings.HasPrefix(*next, "//") {
		return fmt.Errorf("--next must be a path of the dashboard, such as /claims, not %q", *next)
	}
	unlock, err := lockDir(*dir)
	var busy *folderBusy
	switch {
	case err == nil:
		unlock()
		return fmt.Errorf("no quickstart is running with the data folder %s: start one with go run ./examples/quickstart%s; "+
			"its first link opens the dashboard", *dir, dirFlag(*dir))
	case !errors.As(err, &busy):
		return err
	}
	origin, err := os.ReadFile(filepath.Join(*dir, dashboardFile))
	if err != nil {
		return fmt.Errorf("the running quickstart has not opened its dashboard yet: %w", err)
	}
	store, err := controlplane.Open(ctx, controlplane.StoreConfig{SQLitePath: filepath.Join(*dir, "controlplane", "controlplane.db")})
	if err != nil {
		return err
	}
	defer store.Close()
	secret := make([]byte, 32) // signs nothing here: the link is a stored token
	_, _ = rand.Read(secret)
	cp, err := controlplane.New(controlplane.Config{Store: store, JWTSecret: secret, SigninLinks: true})
	if err != nil {
		return err
	}
	defer cp.Close()
	link, expires, err := cp.SigninLink(ctx, agentNamespace, "/signin?next="+url.QueryEscape(*next))
	if err != nil {
		return fmt.Errorf("create a dashboard sign-in link: %w", err)
	}
	fmt.Fprintln(out, strings.TrimSpace(string(origin))+link)
	fmt.Fprintf(out, "One-time link to the dashboard as %s, valid until %s. Add a passkey on its Account page to log in without one.\n",
		agentNamespace, expires.Local().Format("15:04:05"))
	return nil
}

// dirFlag is the --dir option that names dir, or nothing for the default.
func dirFlag(dir string) string {
	if dir == defaultDir() {
		return ""
	}
	return " --dir " + dir
}
