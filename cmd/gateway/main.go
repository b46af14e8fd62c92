// Command gateway is the idn gateway's binary. Each sub-command lives in a
// file of its own and registers itself in init; main only dispatches.
//
//	gateway [serve]                               run the gateway (default when a server command is registered),
//	                                              and keep the dashboard's link once paired
//	gateway list|add|test|rotate|delete [flags]   manage connections in the local store
//	gateway admin-token                           print the admin API's token (made in the data directory if absent)
//	gateway keygen                                print a new master key
//	gateway pair [--session-id --pair-code --namespace] [--daemon|--status|--stop]
//	                                              pair with an owner's dashboard and serve its RPCs
//	gateway --version                             print the version
//
// The composition itself is package gateway; this command only reads flags
// and variables (`gateway <command> -h` lists both) and owns the listener,
// the signals and the exit status. The store is GATEWAY_DATA_DIR/gateway.db
// (default $XDG_DATA_HOME/idn-gateway, else ~/.local/share/idn-gateway),
// sealed under GATEWAY_MASTER_KEY or --master-key. Errors are one line on
// stderr, configuration problems one line each; the exit status is 1 for a
// failure and 2 for a usage error or a configuration problem.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/idnhq/idn/docs"
	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/idnhq/idn/kit/envconf"
)

// command is one sub-command.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) error
	// vars lists the variables the command reads, for -h; nil means those
	// of the store (GATEWAY_DATA_DIR, GATEWAY_MASTER_KEY).
	vars func() []envconf.Var
}

var commands = map[string]*command{}

// defaultCommand runs when no sub-command is given; empty prints usage and
// exits 2. A server sub-command sets it from its own file's init.
var defaultCommand string

func register(c *command) { commands[c.name] = c }

// cliEnv is what a command may use of the process.
type cliEnv struct {
	getenv  func(string) string
	environ []string // NAME=value entries, for variable families
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

// usageError marks a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	name := defaultCommand
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	} else if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			printUsage(stdout)
			return 0
		case "-version", "--version":
			fmt.Fprintln(stdout, "gateway", buildinfo.Version())
			return 0
		}
	}
	switch name {
	case "help":
		printUsage(stdout)
		return 0
	case "version":
		fmt.Fprintln(stdout, "gateway", buildinfo.Version())
		return 0
	}
	cmd, ok := commands[name]
	if !ok {
		if name != "" {
			fmt.Fprintf(stderr, "gateway: unknown command %q\n", name)
		}
		printUsage(stderr)
		return 2
	}
	err := cmd.run(ctx, &cliEnv{getenv: getenv, environ: os.Environ(), stdin: os.Stdin, stdout: stdout, stderr: stderr}, args)
	if err == nil || errors.Is(err, errHelpShown) {
		return 0
	}
	var problems *envconf.Problems
	if errors.As(err, &problems) {
		fmt.Fprintf(stderr, "gateway %s: %v\n", name, err)
		return 2
	}
	msg := strings.Join(strings.Fields(err.Error()), " ") // always one line
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "gateway %s: %s (see gateway %s -h)\n", name, msg, name)
		return 2
	}
	fmt.Fprintf(stderr, "gateway %s: %s\n", name, msg)
	return 1
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: gateway <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nflags:\n  -h, --help   show help (gateway <command> -h: the command's flags and variables)\n  --version    print the version")
	if c := commands[defaultCommand]; c != nil && c.vars != nil {
		fmt.Fprintf(w, "\nWithout a command, gateway runs %s, which reads:\n\n", defaultCommand)
		envconf.PrintVars(w, envconf.WithReference(c.vars(), docs.Gateway))
	}
}
