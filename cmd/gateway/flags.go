package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/docs"
	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/idnhq/idn/kit/envconf"
)

// errHelpShown ends a command successfully after -h printed its flags.
var errHelpShown = errors.New("help shown")

// newFlagSet returns a flag set with the flags every command that opens
// the store shares (--master-key, --version).
func newFlagSet(name string) *flag.FlagSet {
	fs := newBareFlagSet(name)
	fs.String("master-key", "", "master key (standard base64 of 32 bytes); default $GATEWAY_MASTER_KEY")
	return fs
}

// newBareFlagSet returns a flag set with only --version.
func newBareFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.Bool("version", false, "print the version and exit")
	return fs
}

// parseFlags parses args; -h prints "usage: gateway <name> <synopsis>",
// the flags and the variables the command reads to stdout, and --version
// the version. It never echoes a flag's value in an error, because values
// may be secrets.
func parseFlags(env *cliEnv, fs *flag.FlagSet, synopsis string, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(env.stdout, "%s\n\nflags:\n", strings.TrimSpace("usage: gateway "+fs.Name()+" "+synopsis))
		fs.SetOutput(env.stdout)
		fs.PrintDefaults()
		if vars := varsOf(fs); len(vars) > 0 {
			fmt.Fprintln(env.stdout)
			// What -h says of a setting is its row in the reference.
			envconf.PrintVars(env.stdout, envconf.WithReference(vars, docs.Gateway))
		}
		return errHelpShown
	}
	if err == nil && fs.Lookup("version").Value.String() == "true" {
		fmt.Fprintln(env.stdout, "gateway", buildinfo.Version())
		return errHelpShown
	}
	if err != nil {
		msg := err.Error()
		if strings.HasPrefix(msg, "invalid value") {
			if i := strings.Index(msg, " for flag "); i >= 0 {
				name, _, _ := strings.Cut(msg[i+len(" for flag "):], ":")
				return usagef("invalid value for flag %s", name)
			}
			return usagef("invalid flag value")
		}
		return usagef("%s", msg)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected positional arguments (%d); every value is given with a flag", fs.NArg())
	}
	return nil
}

func flagString(fs *flag.FlagSet, name string) string { return fs.Lookup(name).Value.String() }

// varsOf returns the variables of fs's command: its own list, else the
// store's when the command opens the store (it has --master-key).
func varsOf(fs *flag.FlagSet) []envconf.Var {
	if c := commands[fs.Name()]; c != nil && c.vars != nil {
		return c.vars()
	}
	if fs.Lookup("master-key") != nil {
		return storeVars()
	}
	return nil
}

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// subjectRulesFlag adds each SUBJECT=PATTERN of a repeatable flag to
// rules, a connection's approval_subjects: to the subject's routes when
// route is set, else to its tools. The subject ends at the first '='.
type subjectRulesFlag struct {
	rules map[string]approval.Rules
	route bool
}

func (f subjectRulesFlag) String() string { return "" }

func (f subjectRulesFlag) Set(v string) error {
	subject, pattern, ok := strings.Cut(v, "=")
	if !ok || subject == "" || pattern == "" {
		return errors.New("takes SUBJECT=PATTERN")
	}
	r := f.rules[subject]
	if f.route {
		r.Routes = append(r.Routes, pattern)
	} else {
		r.Tools = append(r.Tools, pattern)
	}
	f.rules[subject] = r
	return nil
}

// secretsFlag collects repeatable --secret name=value. Set never fails (the
// flag package would quote the value, a secret, in its error); malformed
// entries are reported by check, naming only their position. The value "-"
// means "read it from standard input", which keeps the secret out of the
// process list and the shell history.
type secretsFlag struct {
	values    map[string]string
	fromStdin []string
	bad       []int
	n         int
}

// maxStdinSecret bounds a secret read from standard input.
const maxStdinSecret = 64 << 10

func (s *secretsFlag) String() string { return "" }

func (s *secretsFlag) Set(v string) error {
	s.n++
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		s.bad = append(s.bad, s.n)
		return nil
	}
	if s.values == nil {
		s.values = map[string]string{}
	}
	s.values[name] = value
	if value == "-" {
		s.fromStdin = append(s.fromStdin, name)
	}
	return nil
}

// check reports malformed entries and reads the one value given as "-"
// from stdin (its trailing line break removed).
func (s *secretsFlag) check(stdin io.Reader) error {
	if len(s.bad) > 0 {
		return usagef("--secret number %d is not name=value", s.bad[0])
	}
	switch len(s.fromStdin) {
	case 0:
		return nil
	case 1:
	default:
		return usagef("only one --secret may be read from standard input")
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, maxStdinSecret+1))
	if err != nil {
		return fmt.Errorf("reading secret %s from standard input: %w", s.fromStdin[0], err)
	}
	if len(raw) > maxStdinSecret {
		return fmt.Errorf("secret %s on standard input is longer than %d bytes", s.fromStdin[0], maxStdinSecret)
	}
	value := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
	if value == "" {
		return fmt.Errorf("secret %s: standard input was empty", s.fromStdin[0])
	}
	s.values[s.fromStdin[0]] = value
	return nil
}
