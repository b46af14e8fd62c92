package idn_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idnhq/idn/errcode"
)

// The repository documents itself: comments and docs refer to nothing
// outside it, every environment variable the code reads is in the
// reference, and (errcode_test) every error code is.

// sourceFiles calls fn for every file of the repository with one of exts,
// outside hidden folders and node_modules.
func sourceFiles(t *testing.T, exts []string, fn func(path string, src []byte)) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		for _, ext := range exts {
			if strings.HasSuffix(path, ext) {
				src, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				fn(path, src)
				return nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var (
	// Names of the developers' own notes, which are not in the
	// repository; spelled in two halves so this file does not match.
	outsideNames = []string{"DECI" + "SIONS", "spec" + "/"}
	// mdRef is a path-like reference to a Markdown file, or a URL.
	mdRef = regexp.MustCompile(`https?://[^\s)"'<>]+|[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)
)

const repoURL = "github.com/idnhq/idn/blob/main/"

// TestNoReferencesOutsideRepository: no comment or document cites the
// developers' notes, and every Markdown file a comment or document names
// (relative to itself or to the repository root, or as a URL of this
// repository) exists, so a reader can follow every reference.
func TestNoReferencesOutsideRepository(t *testing.T) {
	t.Parallel()
	sourceFiles(t, []string{".go", ".md", ".js", ".html", ".css", ".sh", ".yaml", ".yml"}, func(path string, src []byte) {
		for i, line := range bytes.Split(src, []byte("\n")) {
			at := path + ":" + strconv.Itoa(i+1)
			for _, name := range outsideNames {
				if bytes.Contains(line, []byte(name)) {
					t.Errorf("%s cites %q, a document outside the repository: state the rule itself", at, name)
				}
			}
			for _, m := range mdRef.FindAll(line, -1) {
				ref := string(m)
				if strings.Contains(ref, "://") {
					rest, ok := strings.CutPrefix(strings.SplitN(ref, "://", 2)[1], repoURL)
					if !ok {
						continue // another site
					}
					ref, _, _ = strings.Cut(rest, "#")
					if !exists(ref) {
						t.Errorf("%s: %s names %s, which is not in the repository", at, m, ref)
					}
					continue
				}
				if !exists(filepath.Join(filepath.Dir(path), ref)) && !exists(strings.TrimPrefix(ref, "/")) {
					t.Errorf("%s names %s, which is not in the repository", at, ref)
				}
			}
		}
	})
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// envReaders are the functions that read an environment variable by a
// literal name: the os and getenv forms, and the methods of
// kit/envconf's Reader.
var envReaders = map[string]bool{
	"Getenv": true, "getenv": true, "LookupEnv": true,
	"String": true, "Secret": true, "Raw": true, "Int": true, "Int64": true, "Seconds": true,
	"Hours": true, "Bool": true, "List": true, "OneOf": true, "Family": true,
}

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]{2,}$`)

// systemVariables are read for their usual meaning only (a default
// folder, a benchmark's CPU count), so the reference need not list them.
var systemVariables = map[string]bool{"HOME": true, "XDG_DATA_HOME": true, "GOMAXPROCS": true}

// TestEnvironmentVariablesDocumented: every variable the code reads by name
// is in the reference: a variable of the gateway (cmd/gateway, gateway) in
// docs/gateway.md, of the control plane (cmd/controlplane, controlplane) in
// docs/control-plane.md, of an example or the benchmark in its own folder's
// comments or Markdown, any other in docs/ or the README. The binaries'
// own tests compare their recorded variables, with defaults, row by row.
func TestEnvironmentVariablesDocumented(t *testing.T) {
	t.Parallel()
	read := func(name string) []byte {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	gatewayRef, controlRef := read("docs/gateway.md"), read("docs/control-plane.md")
	var anyRef []byte
	sourceFiles(t, []string{".md"}, func(path string, src []byte) {
		if strings.HasPrefix(path, "docs/") || path == "README.md" {
			anyRef = append(anyRef, src...)
		}
	})
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	own := map[string][]byte{} // folder → its comments and Markdown
	sourceFiles(t, []string{".go", ".md"}, func(path string, src []byte) {
		dir := filepath.ToSlash(filepath.Dir(path))
		if strings.HasSuffix(path, ".md") {
			own[dir] = append(own[dir], src...)
			return
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range f.Comments {
			own[dir] = append(own[dir], c.Text()...)
		}
		if !strings.HasSuffix(path, "_test.go") {
			files[path] = f
		}
	})
	found := 0
	for path, f := range files {
		ref, refName := anyRef, "docs/ or README.md"
		switch dir := filepath.ToSlash(filepath.Dir(path)); {
		case dir == "cmd/gateway" || dir == "gateway":
			ref, refName = gatewayRef, "docs/gateway.md"
		case dir == "cmd/controlplane" || dir == "controlplane":
			ref, refName = controlRef, "docs/control-plane.md"
		case strings.HasPrefix(dir, "examples/") || dir == "bench":
			ref, refName = own[dir], dir+"'s comments"
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			var fn string
			switch f := call.Fun.(type) {
			case *ast.Ident:
				fn = f.Name
			case *ast.SelectorExpr:
				fn = f.Sel.Name
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !envReaders[fn] || !ok || lit.Kind != token.STRING {
				return true
			}
			name, _ := strconv.Unquote(lit.Value)
			if !envName.MatchString(name) || systemVariables[name] {
				return true
			}
			found++
			if !regexp.MustCompile(`\b` + name + `\b`).Match(ref) {
				t.Errorf("%s reads %s, which %s does not document", fset.Position(lit.Pos()), name, refName)
			}
			return true
		})
	}
	if found < 50 {
		t.Fatalf("found only %d variables read; the scan is broken", found)
	}
}

// codeRow is a row of an error table: | `CODE` | status | meaning |.
var codeRow = regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]+)` \\| (\\d{3}) \\|")

// TestErrorCodesDocumented: every code of the errcode table has a row, with
// its status, in the error table of docs/gateway.md or
// docs/control-plane.md, and every row names a code of the table with its
// status, so the reference neither misses nor invents a code.
func TestErrorCodesDocumented(t *testing.T) {
	t.Parallel()
	rows := map[string]string{} // code → status, from both references
	for _, ref := range []string{"docs/gateway.md", "docs/control-plane.md"} {
		src, err := os.ReadFile(ref)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range codeRow.FindAllStringSubmatch(string(src), -1) {
			if prev, ok := rows[m[1]]; ok && prev != m[2] {
				t.Errorf("%s: %s has status %s here and %s in the other reference", ref, m[1], m[2], prev)
			}
			rows[m[1]] = m[2]
			code, ok := errcode.Parse(m[1])
			switch {
			case !ok || code.String() != m[1]:
				t.Errorf("%s lists %s, which is not an error code (or its former name)", ref, m[1])
			case strconv.Itoa(code.Status()) != m[2]:
				t.Errorf("%s gives %s status %s; its status is %d", ref, m[1], m[2], code.Status())
			}
		}
	}
	n := 0
	for code := range errcode.All() {
		n++
		if _, ok := rows[code.String()]; !ok {
			t.Errorf("error code %s (%d) is in neither docs/gateway.md nor docs/control-plane.md", code, code.Status())
		}
	}
	if n < 50 {
		t.Fatalf("errcode.All yields only %d codes", n)
	}
}

// errorsRow is a row of docs/errors.md, anchored by the code:
// | <a id="CODE"></a>`CODE` | status | ….
var errorsRow = regexp.MustCompile("(?m)^\\| <a id=\"([A-Z][A-Z0-9_]+)\"></a>`([A-Z][A-Z0-9_]+)` \\| (\\d{3}) \\|")

// TestErrorsIndex: every code has exactly one row in docs/errors.md, with
// its status, under the anchor its envelope's docs_url names, and the
// page lists nothing else.
func TestErrorsIndex(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, m := range errorsRow.FindAllStringSubmatch(string(src), -1) {
		rows[m[1]]++
		code, ok := errcode.Parse(m[1])
		switch {
		case m[1] != m[2]:
			t.Errorf("docs/errors.md: the row anchored %s names %s", m[1], m[2])
		case !ok || code.String() != m[1]:
			t.Errorf("docs/errors.md lists %s, which is not an error code (or its former name)", m[1])
		case strconv.Itoa(code.Status()) != m[3]:
			t.Errorf("docs/errors.md gives %s status %s; its status is %d", m[1], m[3], code.Status())
		}
	}
	for code := range errcode.All() {
		if !strings.HasSuffix(code.DocsURL(), "docs/errors.md#"+code.String()) {
			t.Errorf("%s: docs_url %s does not name its row", code, code.DocsURL())
		}
		if rows[code.String()] != 1 {
			t.Errorf("docs/errors.md has %d rows for %s, want 1", rows[code.String()], code)
		}
	}
}

// errorResponse is how the OpenAPI documents name the codes of an error
// answer: "Error: `CODE`, `CODE`".
var errorResponse = regexp.MustCompile("^Error: (`[A-Z][A-Z0-9_]+`(?:, `[A-Z][A-Z0-9_]+`)*)")

// TestOpenAPIErrorCodes: every code an OpenAPI document names for an error
// answer is a code of the errcode table, under the status that code has.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"controlplane/openapi.json", "gateway/openapi.json"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		named := 0
		for path, item := range doc.Paths {
			for method, rawOp := range item {
				var op struct {
					Responses map[string]struct {
						Description string `json:"description"`
					} `json:"responses"`
				}
				if method == "parameters" || json.Unmarshal(rawOp, &op) != nil {
					continue
				}
				for status, res := range op.Responses {
					m := errorResponse.FindStringSubmatch(res.Description)
					if m == nil {
						continue
					}
					for _, name := range strings.Split(m[1], ", ") {
						named++
						name = strings.Trim(name, "`")
						code, ok := errcode.Parse(name)
						switch {
						case !ok || code.String() != name:
							t.Errorf("%s: %s %s answers %s with %s, which is not an error code (or its former name)", file, method, path, status, name)
						case strconv.Itoa(code.Status()) != status:
							t.Errorf("%s: %s %s lists %s under %s; its status is %d", file, method, path, name, status, code.Status())
						}
					}
				}
			}
		}
		if named < 50 {
			t.Errorf("%s names only %d error codes; the scan is broken", file, named)
		}
	}
}
