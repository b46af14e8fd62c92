package envconf

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReaderCollectsEveryProblem(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"A_INT":    "twelve",
		"A_SECS":   "0",
		"A_BOOL":   "maybe",
		"A_MODE":   "loud",
		"A_LIST":   " x, ,y ",
		"A_STRING": "  value  ",
		"A_TOKEN":  "s3cr3t-value",
	}
	r := New(func(k string) string { return env[k] })
	if got := r.Int("A_INT", 7, 0, "an int"); got != 7 {
		t.Errorf("Int = %d, want the default after a problem", got)
	}
	if got := r.Seconds("A_SECS", 30, "a duration"); got != 30*time.Second {
		t.Errorf("Seconds = %v", got)
	}
	r.Bool("A_BOOL", true, "a flag")
	r.OneOf("A_MODE", "quiet", []string{"quiet", "normal"}, "a mode")
	if got := r.List("A_LIST", "a list"); strings.Join(got, "|") != "x|y" {
		t.Errorf("List = %q", got)
	}
	if got := r.String("A_STRING", "def", "a string"); got != "value" {
		t.Errorf("String = %q", got)
	}
	if got := r.String("A_UNSET", "def", "unset"); got != "def" {
		t.Errorf("String(unset) = %q", got)
	}
	if got := r.Secret("A_TOKEN", "a secret"); got != "s3cr3t-value" {
		t.Errorf("Secret = %q", got)
	}
	r.Problemf("A_MODE and A_BOOL disagree")

	err := r.Err()
	var p *Problems
	if !errors.As(err, &p) || len(*p) != 5 {
		t.Fatalf("Err = %v, want 5 problems", err)
	}
	msg := err.Error()
	for _, want := range []string{"A_INT", "A_SECS", "A_BOOL", "A_MODE", "disagree"} {
		if !strings.Contains(msg, want) {
			t.Errorf("problems lack %s:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "s3cr3t") {
		t.Errorf("a problem echoes a secret:\n%s", msg)
	}
}

func TestVarsListWhatWasRead(t *testing.T) {
	t.Parallel()
	r := New(func(string) string { return "" })
	r.String("B_ADDR", "127.0.0.1:1", "listen address")
	r.Int("B_N", 3, 1, "how many")
	r.String("B_ADDR", "127.0.0.1:1", "listen address") // read twice, listed once
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	vars := r.Vars()
	if len(vars) != 2 || vars[0].Name != "B_ADDR" || vars[1].Default != "3" {
		t.Fatalf("Vars = %+v", vars)
	}
	var b strings.Builder
	PrintVars(&b, vars)
	if !strings.Contains(b.String(), "B_ADDR  listen address (default 127.0.0.1:1)") {
		t.Fatalf("PrintVars:\n%s", b.String())
	}
}

func TestLog(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, level, format string
		wantProblem         bool
		want, notWant       string
	}{
		{name: "defaults are info and json", want: `"msg":"info line"`},
		{name: "text at warn", level: "warn", format: "text", want: `msg="warn line"`, notWant: "info line"},
		{name: "debug", level: "debug", want: `"msg":"debug line"`},
		{name: "error", level: "error", want: `"msg":"error line"`, notWant: "warn line"},
		{name: "unknown level", level: "loud", wantProblem: true, want: `"msg":"info line"`},
		{name: "unknown format", format: "xml", wantProblem: true, want: `"msg":"info line"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"LOG_LEVEL": tt.level, "LOG_FORMAT": tt.format}
			r := New(func(k string) string { return env[k] })
			l := r.Log()
			if (r.Err() != nil) != tt.wantProblem {
				t.Fatalf("Err = %v, want a problem: %v", r.Err(), tt.wantProblem)
			}
			var b strings.Builder
			log := l.Logger(&b)
			log.Debug("debug line")
			log.Info("info line")
			log.Warn("warn line")
			log.Error("error line")
			if !strings.Contains(b.String(), tt.want) || (tt.notWant != "" && strings.Contains(b.String(), tt.notWant)) {
				t.Errorf("output %q: want %q, not %q", b.String(), tt.want, tt.notWant)
			}
		})
	}
}

func TestFamily(t *testing.T) {
	t.Parallel()
	r := New(func(string) string { return "" })
	got := r.Family("K_", "<ID>", "per-id key", []string{"K_A=1", "K_=x", "K_B= ", "OTHER=2", "K_C_D=3"})
	if len(got) != 2 || got["A"] != "1" || got["C_D"] != "3" {
		t.Errorf("Family = %v", got)
	}
	if vars := r.Vars(); len(vars) != 1 || vars[0].Name != "K_<ID>" {
		t.Errorf("Vars = %+v", vars)
	}
}
