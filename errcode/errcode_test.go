package errcode

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestTableIsComplete(t *testing.T) {
	wireName := regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)
	seen := map[string]Code{}
	n := 0
	for c := range All() {
		n++
		name := c.String()
		if !wireName.MatchString(name) {
			t.Errorf("code %d: wire name %q is not UPPER_SNAKE_CASE", c, name)
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("codes %d and %d share the wire name %s", prev, c, name)
		}
		seen[name] = c
		if s := c.Status(); s < 400 || s > 599 || http.StatusText(s) == "" {
			t.Errorf("%s: status %d is not an HTTP error status", name, s)
		}
		if c.Message() == "" {
			t.Errorf("%s: no message", name)
		}
		if got, ok := Parse(name); !ok || got != c {
			t.Errorf("Parse(%q) = %d, %v", name, got, ok)
		}
	}
	if n != int(codeCount) {
		t.Errorf("All yielded %d codes, the table has %d", n, codeCount)
	}
}

// TestDocListsTable keeps the package documentation's table equal to the
// code table: every code once, with its status and default message.
func TestDocListsTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^\t([A-Z][A-Z0-9_]+) +(\d{3})  (.+)$`)
	listed := map[string]bool{}
	for l := range strings.Lines(f.Doc.Text()) {
		m := line.FindStringSubmatch(strings.TrimSuffix(l, "\n"))
		if m == nil {
			continue
		}
		c, ok := Parse(m[1])
		if !ok || c.String() != m[1] {
			t.Errorf("doc lists %s, which is not a code (or its former name)", m[1])
			continue
		}
		if listed[m[1]] {
			t.Errorf("doc lists %s twice", m[1])
		}
		listed[m[1]] = true
		if status, _ := strconv.Atoi(m[2]); status != c.Status() || m[3] != c.Message() {
			t.Errorf("doc: %s %s %q, table: %d %q", m[1], m[2], m[3], c.Status(), c.Message())
		}
	}
	for c := range All() {
		if !listed[c.String()] {
			t.Errorf("doc does not list %s", c)
		}
	}
}

func TestOutOfRangeIsInternal(t *testing.T) {
	c := codeCount + 3
	if c.String() != "INTERNAL_ERROR" || c.Status() != 500 {
		t.Errorf("out-of-range code reads as %s %d", c, c.Status())
	}
	var zero Code
	if zero != InternalError {
		t.Errorf("zero Code is %s", zero)
	}
}

func TestJSON(t *testing.T) {
	b, err := json.Marshal(map[string]Code{"code": AuthClaimRequired})
	if err != nil || string(b) != `{"code":"AUTH_CLAIM_REQUIRED"}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var v struct{ Code Code }
	if err := json.Unmarshal([]byte(`{"Code":"SLUG_TAKEN"}`), &v); err != nil || v.Code != SlugTaken {
		t.Fatalf("Unmarshal = %v, %v", v.Code, err)
	}
	if err := json.Unmarshal([]byte(`{"Code":"SLUG_TAKN"}`), &v); err == nil {
		t.Fatal("Unmarshal accepted an unknown code")
	}
}

func TestOf(t *testing.T) {
	sentinel := New(ConnectionNotFound, "store: connection not found")
	wrapped := fmt.Errorf("lookup gh: %w", sentinel)
	if c, ok := Of(wrapped); !ok || c != ConnectionNotFound || !errors.Is(wrapped, sentinel) {
		t.Errorf("Of(wrapped) = %s, %v", c, ok)
	}
	if other := New(ConnectionNotFound, "store: connection not found"); errors.Is(wrapped, other) {
		t.Error("two sentinels with one code and message are the same error")
	}
	if _, ok := Of(errors.New("plain")); ok {
		t.Error("Of found a code in a plain error")
	}
	if _, ok := Of(nil); ok {
		t.Error("Of found a code in nil")
	}
}

// TestFormerNames: a former name is no code's name today, and Parse reads
// it as the code that replaced it.
func TestFormerNames(t *testing.T) {
	for name, c := range former {
		if got, ok := Parse(name); !ok || got != c {
			t.Errorf("Parse(%q) = %s, %v; want %s", name, got, ok, c)
		}
		if c.String() == name {
			t.Errorf("%s is a former name and a code's name", name)
		}
		var v struct{ Code Code }
		if err := json.Unmarshal([]byte(`{"Code":"`+name+`"}`), &v); err != nil || v.Code != c {
			t.Errorf("Unmarshal(%s) = %s, %v", name, v.Code, err)
		}
	}
}

// renamedRow is a row of the "Renamed codes" table of docs/errors.md:
// | <a id="OLD"></a>`OLD` | server | old status | `NEW` | new status | ….
var renamedRow = regexp.MustCompile("(?m)^\\| <a id=\"([A-Z][A-Z0-9_]+)\"></a>`([A-Z][A-Z0-9_]+)` \\| [a-z ,]+ \\| (\\d{3}) \\| ((?:`[A-Z][A-Z0-9_]+`(?:, )?)+) \\| (\\d{3}) \\|")

// TestRenamesDocumented holds the "Renamed codes" table of docs/errors.md
// to former: every former name has one row, anchored by it (an old
// docs_url still lands on it), naming the code Parse reads it as with
// that code's status.
func TestRenamesDocumented(t *testing.T) {
	src, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, m := range renamedRow.FindAllStringSubmatch(string(src), -1) {
		old := m[1]
		rows[old]++
		c, ok := former[old]
		switch {
		case m[1] != m[2]:
			t.Errorf("docs/errors.md: the renamed row anchored %s names %s", m[1], m[2])
		case !ok:
			t.Errorf("docs/errors.md lists %s as renamed; errcode does not know it as a former name", old)
		case !strings.Contains(m[4], "`"+c.String()+"`"):
			t.Errorf("docs/errors.md: %s became %s, not %s", old, c, m[4])
		case m[5] != strconv.Itoa(c.Status()):
			t.Errorf("docs/errors.md: %s's new status is %d, not %s", old, c.Status(), m[5])
		}
	}
	for name := range former {
		if rows[name] != 1 {
			t.Errorf("docs/errors.md has %d renamed rows for %s, want 1", rows[name], name)
		}
	}
}
