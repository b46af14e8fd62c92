// Command idn is the agent CLI: it creates an agent identity and signs HTTP
// requests with it under the idn-rfc9421-v1 profile.
//
//	idn init <namespace> [--name NAME] [--force] [--json]
//	idn whoami [--namespace NS] [--json]
//	idn sign [-X METHOD] [-H 'K: V']... [-d BODY | -d @file] [--subject S] [--namespace NS] [--json] URL
//	idn curl [same flags as sign] [-i] [-f] [--json] URL
//	idn mcp --gateway URL --connection ID [--subject S] [--namespace NS] [--retry 5s]
//
//	idn --version
//
// IDN_HOME selects the home folder (default ~/.idn). With one identity in
// it, --namespace is optional. Every command answers -h with its flags and
// the variables it reads.
//
// idn mcp is an MCP server on stdin and stdout for desktop MCP clients: it
// forwards every request to the gateway's MCP endpoint /mcp/{ID}, each HTTP
// request signed with the identity, and opens a new gateway session when
// the gateway has forgotten its own (idle expiry, restart). Started before
// the agent's claim is approved, it stays up, tells the client why, and
// offers the tools once approved (asking the gateway every --retry). A
// client of the stateless revision 2026-07-28 has each request forwarded
// as it came, without a session.
//
// idn mcp is built on the MCP go-sdk, but carries some messages as JSON
// past it, because the SDK's types would rewrite what must pass unchanged:
// the stateless revision's requests and answers (their _meta, rounds and
// requestState), an elicitation's answer (the SDK fills in schema
// defaults), and tasks, which the SDK does not model.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/idnhq/idn/kit/envconf"
)

const usage = `idn: the agent CLI of idn (signed HTTP requests, profile idn-rfc9421-v1)

Usage:
  idn init <namespace> [--name NAME] [--force]
                                        create an identity and print its DID and key;
                                        --name gives the agent a display name owners
                                        see on its claims (on an existing identity:
                                        renames it, same key)
  idn whoami [--namespace NS]           show an identity
  idn sign [flags] URL                  print the headers that sign a request
  idn curl [flags] [-i] [-f] URL        send a signed request and print the response
  idn mcp --gateway URL --connection ID serve a gateway's MCP connection on stdin/stdout
                                        (for desktop MCP clients; --subject, --namespace,
                                        --retry: how often to ask again before approval)

Request flags (sign, curl):
  -X METHOD        HTTP method (default GET, or POST with -d)
  -H 'Name: value' extra header (repeatable)
  -d BODY          request body; -d @file reads a file, -d @- reads stdin
  --subject S      idn-subject (default: the namespace)
  --namespace NS   identity to use (optional when only one exists)
  -i               (curl) also print the status line and response headers
  -f               (curl) exit 22 when the response status is 400 or above

  --json           (init, whoami, sign, curl) print JSON instead of text

  -h, --help       show help (idn <command> -h: the command's own)
  --version        print the version

`

// errUsage marks errors caused by how the command was called (exit 2).
var errUsage = errors.New("usage")

// errHelpShown ends a command successfully after -h or --version printed.
var errHelpShown = errors.New("help shown")

// synopses are the commands' argument summaries, for -h.
var synopses = map[string]string{
	"init":   "<namespace> [--name NAME] [--force] [--json]",
	"whoami": "[--namespace NS] [--json]",
	"sign":   "[flags] [--json] URL",
	"curl":   "[flags] [-i] [-f] [--json] URL",
	"mcp":    "--gateway URL --connection ID [--subject S] [--namespace NS] [--retry 5s]",
}

// env is the part of the process environment the commands read.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

func main() {
	os.Exit(run(os.Args[1:], env{os.Stdin, os.Stdout, os.Stderr, os.Getenv}))
}

// run executes one command and returns the process exit code. Errors are
// printed as one line on stderr.
func run(args []string, e env) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(e.stdout, usage)
		envconf.PrintVars(e.stdout, homeVars())
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "version" || args[0] == "-version" || args[0] == "--version" {
		fmt.Fprintln(e.stdout, "idn", buildinfo.Version())
		return 0
	}
	var err error
	switch args[0] {
	case "init":
		err = cmdInit(args[1:], e)
	case "whoami":
		err = cmdWhoami(args[1:], e)
	case "sign":
		err = cmdSign(args[1:], e)
	case "mcp":
		err = cmdMCP(args[1:], e)
	case "curl":
		var code int
		code, err = cmdCurl(args[1:], e)
		if err == nil {
			return code
		}
	default:
		err = fmt.Errorf("%w: unknown command %q (try 'idn help')", errUsage, args[0])
	}
	if err == nil || errors.Is(err, errHelpShown) {
		return 0
	}
	fmt.Fprintln(e.stderr, "idn: "+oneLine(strings.TrimPrefix(err.Error(), errUsage.Error()+": ")))
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// readHome reads IDN_HOME through r; "" means ~/.idn.
func readHome(r *envconf.Reader) string {
	return r.String("IDN_HOME", "", "folder of the agent identities (default ~/.idn)")
}

// homeVars are the variables every command reads.
func homeVars() []envconf.Var {
	r := envconf.New(func(string) string { return "" })
	readHome(r)
	return r.Vars()
}

// home returns IDN_HOME or ~/.idn.
func home(e env) (string, error) {
	if h := readHome(envconf.New(e.getenv)); h != "" {
		return h, nil
	}
	dir, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find a home folder; set IDN_HOME")
	}
	return filepath.Join(dir, ".idn"), nil
}

// newFlagSet returns a command's flag set with --version.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Bool("version", false, "print the version and exit")
	return fs
}

// parseInterleaved parses flags that may appear before or after positional
// arguments, as users type curl-style commands. -h prints the command's
// usage, flags and variables, --version the version; both end the command
// with errHelpShown.
func parseInterleaved(fs *flag.FlagSet, args []string, e env) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(e.stdout, "usage: idn %s %s\n\nflags:\n", fs.Name(), synopses[fs.Name()])
			fs.SetOutput(e.stdout)
			fs.PrintDefaults()
			fmt.Fprintln(e.stdout)
			envconf.PrintVars(e.stdout, homeVars())
			return nil, errHelpShown
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		if fs.Lookup("version").Value.String() == "true" {
			fmt.Fprintln(e.stdout, "idn", buildinfo.Version())
			return nil, errHelpShown
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}
