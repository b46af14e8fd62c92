package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/idnhq/idn/docs"
	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/idnhq/idn/kit/envconf"
)

// command is one node of the command line: a command that runs (serve,
// registry deploy) or a group whose subcommands do (registry). Every node
// answers -h with its usage, flags and variables, and --version.
type command struct {
	name    string
	summary string // one line, shown in the parent's usage
	// args names the positional arguments in the usage line; empty means
	// the command takes none and extra arguments are a usage error.
	args string
	// setup declares the command's flags on fs and returns what runs once
	// they are parsed, with the positional arguments. Nil for a group.
	setup func(fs *flag.FlagSet) func(ctx context.Context, env *cliEnv, args []string) error
	// vars lists the variables the command reads, for -h; nil: none.
	vars func() []envconf.Var
	sub  []*command
	// defaultSub runs when a group is given no subcommand; empty makes
	// the subcommand required.
	defaultSub string
}

// cliEnv is what a command may use of the process.
type cliEnv struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

// errDone ends a command successfully after it printed help or the
// version.
var errDone = errors.New("done")

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

func (c *command) lookup(name string) *command {
	for _, s := range c.sub {
		if s.name == name {
			return s
		}
	}
	return nil
}

// dispatch runs the command args name below c (path is c's command line,
// "controlplane registry") and returns the path of the command that ran,
// for its error message.
func (c *command) dispatch(ctx context.Context, env *cliEnv, path string, args []string) (string, error) {
	if len(c.sub) > 0 {
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			s := c.lookup(args[0])
			if s == nil {
				return path, usagef("unknown command %q", args[0])
			}
			return s.dispatch(ctx, env, path+" "+s.name, args[1:])
		}
		if s := c.lookup(c.defaultSub); s != nil && (len(args) == 0 || !isHelpOrVersion(args[0])) {
			return s.dispatch(ctx, env, path+" "+s.name, args)
		}
	}
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	version := fs.Bool("version", false, "print the version and exit")
	var run func(context.Context, *cliEnv, []string) error
	if c.setup != nil {
		run = c.setup(fs)
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.printUsage(env.stdout, path, fs)
		return path, errDone
	case err != nil:
		return path, flagError(err)
	case *version:
		fmt.Fprintln(env.stdout, "controlplane", buildinfo.Version())
		return path, errDone
	case run == nil:
		c.printUsage(env.stderr, path, fs)
		return path, usagef("a command is required")
	case fs.NArg() > 0 && c.args == "":
		// The count, not the values: a value given without its flag may be
		// a secret.
		return path, usagef("unexpected arguments (%d); every value is given with a flag", fs.NArg())
	}
	return path, run(ctx, env, fs.Args())
}

func isHelpOrVersion(arg string) bool {
	switch strings.TrimLeft(arg, "-") {
	case "h", "help", "version":
		return true
	}
	return false
}

// flagError rewords a flag parsing error without the value, which may be a
// secret.
func flagError(err error) error {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, " for flag "); ok && strings.HasPrefix(msg, "invalid value") {
		name, _, _ := strings.Cut(rest, ":")
		return usagef("invalid value for flag %s", name)
	}
	return usagef("%s", msg)
}

// printUsage writes c's usage line, subcommands, flags and variables.
func (c *command) printUsage(w io.Writer, path string, fs *flag.FlagSet) {
	line := path
	if len(c.sub) > 0 {
		line += " <command>"
		if c.defaultSub != "" {
			line = path + " [command]"
		}
	}
	line += " [flags]"
	if c.args != "" {
		line += " " + c.args
	}
	fmt.Fprintln(w, "usage:", line)
	if c.summary != "" {
		fmt.Fprintf(w, "\n%s.\n", strings.ToUpper(c.summary[:1])+c.summary[1:])
	}
	if len(c.sub) > 0 {
		fmt.Fprintln(w, "\ncommands:")
		subs := slices.Clone(c.sub)
		slices.SortFunc(subs, func(a, b *command) int { return strings.Compare(a.name, b.name) })
		for _, s := range subs {
			summary := s.summary
			if s.name == c.defaultSub {
				summary += " (the default)"
			}
			fmt.Fprintf(w, "  %-10s %s\n", s.name, summary)
		}
		fmt.Fprintf(w, "\n'%s <command> -h' shows a command's flags and variables.\n", path)
	}
	fmt.Fprintln(w, "\nflags:")
	fmt.Fprintln(w, "  -h, --help\n    \tshow this help")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	vars := c.vars
	if s := c.lookup(c.defaultSub); s != nil && vars == nil {
		vars = s.vars
		fmt.Fprintf(w, "\nWithout a command, %s runs %s, which reads:\n", path, s.name)
	}
	if vars != nil {
		fmt.Fprintln(w)
		// What -h says of a setting is its row in the reference.
		envconf.PrintVars(w, envconf.WithReference(vars(), docs.ControlPlane))
	}
}
