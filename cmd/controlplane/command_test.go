package main

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/idnhq/idn/kit/envconf"
)

// TestDispatchGroup drives a command group like registry: a subcommand is
// required, each level answers -h with its own usage, flags and variables,
// and flags and positional arguments reach the command that runs.
func TestDispatchGroup(t *testing.T) {
	t.Parallel()
	var ran []string
	group := &command{name: "group", summary: "a group", sub: []*command{{
		name:    "leaf",
		summary: "a leaf",
		args:    "NAME",
		vars:    func() []envconf.Var { return []envconf.Var{{Name: "LEAF_VAR", Doc: "what the leaf reads"}} },
		setup: func(fs *flag.FlagSet) func(context.Context, *cliEnv, []string) error {
			n := fs.Int("n", 1, "how many")
			return func(_ context.Context, _ *cliEnv, args []string) error {
				ran = append(ran, strings.Repeat(strings.Join(args, ","), *n))
				return nil
			}
		},
	}}}
	top := &command{name: "tool", sub: []*command{group}}
	for _, tt := range []struct {
		name      string
		args      []string
		wantPath  string
		wantUsage bool
		wantOut   []string
		notOut    string
	}{
		{name: "leaf runs", args: []string{"group", "leaf", "-n", "2", "x"}, wantPath: "tool group leaf"},
		{name: "group needs a command", args: []string{"group"}, wantPath: "tool group", wantUsage: true},
		{name: "group help", args: []string{"group", "-h"}, wantPath: "tool group",
			wantOut: []string{"usage: tool group <command> [flags]", "leaf", "a leaf", "'tool group <command> -h'"}, notOut: "LEAF_VAR"},
		{name: "leaf help", args: []string{"group", "leaf", "--help"}, wantPath: "tool group leaf",
			wantOut: []string{"usage: tool group leaf [flags] NAME", "-n int", "how many", "LEAF_VAR", "what the leaf reads"}},
		{name: "unknown subcommand", args: []string{"group", "leef"}, wantPath: "tool group", wantUsage: true},
		{name: "bad flag value is not echoed", args: []string{"group", "leaf", "-n", "s3cr3t"}, wantPath: "tool group leaf", wantUsage: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			path, err := top.dispatch(context.Background(), &cliEnv{getenv: env(nil), stdout: &stdout, stderr: &stderr}, "tool", tt.args)
			var usage *usageError
			if path != tt.wantPath || errors.As(err, &usage) != tt.wantUsage || (!tt.wantUsage && err != nil && !errors.Is(err, errDone)) {
				t.Fatalf("dispatch = %q, %v", path, err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error echoes a flag value: %v", err)
			}
			for _, want := range tt.wantOut {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("help lacks %q:\n%s", want, stdout.String())
				}
			}
			if tt.notOut != "" && strings.Contains(stdout.String(), tt.notOut) {
				t.Errorf("help shows %q:\n%s", tt.notOut, stdout.String())
			}
		})
	}
	if strings.Join(ran, "|") != "xx" {
		t.Errorf("ran %q, want the leaf once with n=2 and x", ran)
	}
}
