// Package envconf reads a binary's settings from environment variables. A
// Reader collects every problem instead of stopping at the first, so a
// binary reports its whole configuration in one message, and it records
// each variable it was asked for (name, default, meaning), so `--help` and
// the reference documentation list exactly what the code reads.
//
// Both servers use it the same way:
//
//	r := envconf.New(os.Getenv)
//	addr := r.String("GATEWAY_ADDR", "127.0.0.1:38100", "listen address")
//	ttl := r.Seconds("GATEWAY_CLAIMS_CACHE_TTL_SECONDS", 30, "how long claims stay fresh")
//	if err := r.Err(); err != nil { // *Problems: print it, exit 2
//		…
//	}
package envconf

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Var describes one variable a Reader was asked for.
type Var struct {
	Name    string
	Default string // as a user would write it; "" when there is none
	// Doc is the short description given in code; a command's -h shows
	// the reference's row instead when there is one (WithReference).
	Doc string
}

// Problems lists every configuration problem found; it is the error Err
// returns.
type Problems []string

func (p Problems) Error() string {
	return "configuration problems:\n  - " + strings.Join(p, "\n  - ")
}

// Reader reads variables through getenv.
type Reader struct {
	getenv   func(string) string
	problems Problems
	vars     []Var
	seen     map[string]bool
}

// New returns a Reader over getenv (os.Getenv, or a map's lookup in tests).
func New(getenv func(string) string) *Reader {
	return &Reader{getenv: getenv, seen: map[string]bool{}}
}

// Problemf records a problem that a single variable's parser cannot see,
// such as two settings that contradict each other.
func (r *Reader) Problemf(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// Err returns the problems found so far as *Problems, or nil.
func (r *Reader) Err() error {
	if len(r.problems) == 0 {
		return nil
	}
	p := slices.Clone(r.problems)
	return &p
}

// Vars returns the variables read, in the order they were first read.
func (r *Reader) Vars() []Var { return slices.Clone(r.vars) }

func (r *Reader) note(name, def, doc string) {
	if r.seen[name] {
		return
	}
	r.seen[name] = true
	r.vars = append(r.vars, Var{Name: name, Default: def, Doc: doc})
}

// Raw returns the trimmed value of name ("" when unset) and records it.
func (r *Reader) Raw(name, doc string) string {
	r.note(name, "", doc)
	return strings.TrimSpace(r.getenv(name))
}

// String returns name's value, or def when it is unset or blank.
func (r *Reader) String(name, def, doc string) string {
	r.note(name, def, doc)
	if v := strings.TrimSpace(r.getenv(name)); v != "" {
		return v
	}
	return def
}

// Secret is String for values that must never be echoed: a problem names
// the variable, never its value.
func (r *Reader) Secret(name, doc string) string {
	r.note(name, "", doc)
	return strings.TrimSpace(r.getenv(name))
}

// Int returns name as a whole number >= minimum, or def when unset.
func (r *Reader) Int(name string, def, minimum int, doc string) int {
	r.note(name, strconv.Itoa(def), doc)
	raw := strings.TrimSpace(r.getenv(name))
	if raw == "" {
		return def
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < minimum {
		r.Problemf("%s: %q is not a whole number >= %d", name, raw, minimum)
		return def
	}
	return n
}

// Int64 is Int for sizes in bytes.
func (r *Reader) Int64(name string, def, minimum int64, doc string) int64 {
	r.note(name, strconv.FormatInt(def, 10), doc)
	raw := strings.TrimSpace(r.getenv(name))
	if raw == "" {
		return def
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < minimum {
		r.Problemf("%s: %q is not a whole number >= %d", name, raw, minimum)
		return def
	}
	return n
}

// Seconds reads a whole number of seconds (at least 1).
func (r *Reader) Seconds(name string, def int, doc string) time.Duration {
	return time.Duration(r.Int(name, def, 1, doc)) * time.Second
}

// Hours reads a whole number of hours (at least 1).
func (r *Reader) Hours(name string, def int, doc string) time.Duration {
	return time.Duration(r.Int(name, def, 1, doc)) * time.Hour
}

// Bool reads true/false (and the other forms strconv.ParseBool takes).
func (r *Reader) Bool(name string, def bool, doc string) bool {
	r.note(name, strconv.FormatBool(def), doc)
	raw := strings.TrimSpace(r.getenv(name))
	if raw == "" {
		return def
	}
	b, err := strconv.ParseBool(raw)
	if err != nil {
		r.Problemf("%s: %q is not true or false", name, raw)
		return def
	}
	return b
}

// List reads a comma-separated list, dropping blank items.
func (r *Reader) List(name, doc string) []string {
	r.note(name, "", doc)
	var out []string
	for _, f := range strings.Split(r.getenv(name), ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// OneOf returns name's value when it is one of allowed, else def (and a
// problem when it was set to something else).
func (r *Reader) OneOf(name, def string, allowed []string, doc string) string {
	r.note(name, def, doc+" ("+strings.Join(allowed, ", ")+")")
	raw := strings.TrimSpace(r.getenv(name))
	if raw == "" {
		return def
	}
	if !slices.Contains(allowed, raw) {
		r.Problemf("%s: %q is not one of %s", name, raw, strings.Join(allowed, ", "))
		return def
	}
	return raw
}

// PrintVars writes vars as the "Environment" section of a --help text.
func PrintVars(w io.Writer, vars []Var) {
	fmt.Fprintln(w, "Environment:")
	width := 0
	for _, v := range vars {
		width = max(width, len(v.Name))
	}
	for _, v := range vars {
		line := fmt.Sprintf("  %-*s  %s", width, v.Name, v.Doc)
		if v.Default != "" {
			line += " (default " + v.Default + ")"
		}
		fmt.Fprintln(w, line)
	}
}
