package errcode

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// jsModule is the dashboard's module of the codes it branches on.
const jsModule = "../controlplane/internal/dashboard/web/static/errcode.js"

// jsExport is one line of jsModule: export const NAME = 'NAME';
var jsExport = regexp.MustCompile(`(?m)^export const ([A-Z][A-Z0-9_]*) = '([A-Z][A-Z0-9_]*)';$`)

// TestDashboardCodes holds the dashboard's module of codes to the table:
// every name it exports is a code's wire name today, not a former one.
func TestDashboardCodes(t *testing.T) {
	src, err := os.ReadFile(jsModule)
	if err != nil {
		t.Fatal(err)
	}
	exports := jsExport.FindAllStringSubmatch(string(src), -1)
	if len(exports) == 0 {
		t.Fatalf("%s exports no code", jsModule)
	}
	for _, m := range exports {
		c, ok := Parse(m[2])
		switch {
		case m[1] != m[2]:
			t.Errorf("%s: %s holds %q", jsModule, m[1], m[2])
		case !ok:
			t.Errorf("%s exports %s, which is not a code", jsModule, m[2])
		case c.String() != m[2]:
			t.Errorf("%s exports %s, the former name of %s", jsModule, m[2], c)
		}
	}
}

// codeLiteral is a quoted string that may be a code's wire name.
var codeLiteral = regexp.MustCompile(`['"]([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)['"]`)

// TestClientsReadCodesThroughErrcode: no program of the repository spells
// a code (or a former one) as a string to compare answers with; Go code
// names the constants of this package, the dashboard the exports of its
// module. Tests, which pin the wire, and this package are exempt.
func TestClientsReadCodesThroughErrcode(t *testing.T) {
	isCode := func(s string) bool { _, ok := Parse(s); return ok }
	checked := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" || d.Name() == "errcode") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			checked++
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				for _, m := range codeLiteral.FindAllStringSubmatch(lit.Value, -1) {
					if isCode(m[1]) {
						t.Errorf("%s spells the code %s: use the constant of package errcode", path, m[1])
					}
				}
				return true
			})
		case strings.HasPrefix(filepath.ToSlash(path), "../controlplane/internal/dashboard/web/static/") && strings.HasSuffix(path, ".js") && path != jsModule:
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			checked++
			for _, m := range codeLiteral.FindAllStringSubmatch(string(src), -1) {
				if isCode(m[1]) {
					t.Errorf("%s spells the code %s: import it from errcode.js", path, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files; the walk is broken", checked)
	}
}
