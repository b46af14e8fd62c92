// Command controlplane runs the idn control plane (package controlplane).
//
//	controlplane [serve]     run the HTTP server (the default command)
//	controlplane provision --namespace NS --service SLUG [--api-key-file FILE]
//	                         create a service and an API key for a gateway (once per FILE)
//	controlplane --version   print the version
//	controlplane <command> -h
//	                         a command's usage, flags and the variables it reads
//
// Every setting is an environment variable; docs/control-plane.md describes
// each one, and `controlplane -h` lists them with their defaults. serve
// reads and checks them all before it opens anything. The problems are
// listed together, one per line, and the exit status is 2 (1 for a failure
// after start). With ENVIRONMENT=local and nothing else set it runs on
// SQLite in IDN_DATA_DIR with secrets it generates there once (the
// directory 0700, its files 0600).
//
// serve listens on CONTROLPLANE_ADDR, by default 127.0.0.1:8787. Binding
// beyond loopback is a choice made by setting it, and is logged as a
// warning at start. serve:
//   - serves the API, /health, /health/live, /health/ready and /metrics
//     (loopback clients, or CONTROLPLANE_METRICS_TOKEN as a bearer token);
//   - logs one line per request (request id, method, route pattern,
//     status, duration) in the LOG_FORMAT and at the LOG_LEVEL chosen;
//   - runs the claim expiry and cleanup once a minute, and the webhook and
//     registry workers continuously;
//   - on SIGINT or SIGTERM, drains in-flight requests for up to
//     CONTROLPLANE_SHUTDOWN_TIMEOUT_SECONDS and logs how the drain ended.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/idnhq/idn/kit/envconf"
)

// root is the command line; each command registers itself from its own
// file.
var root = &command{name: "controlplane", summary: "the idn control plane", defaultSub: "serve"}

func register(c *command) { root.sub = append(root.sub, c) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status: 0, 1 for a
// failure, 2 for a usage error or configuration problems.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	path, err := root.dispatch(ctx, &cliEnv{getenv: getenv, stdout: stdout, stderr: stderr}, root.name, args)
	var problems *envconf.Problems
	var usage *usageError
	switch {
	case err == nil, errors.Is(err, errDone):
		return 0
	case errors.As(err, &problems):
		fmt.Fprintf(stderr, "%s: %v\n", path, err)
		return 2
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "%s: %s (see %s -h)\n", path, usage.msg, path)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %s\n", path, strings.Join(strings.Fields(err.Error()), " "))
	return 1
}
