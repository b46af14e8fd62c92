// Package shape measures the repository's packages against the size its
// design keeps them to: no package over MaxLines lines of non-test Go
// code, no type with more than MaxMethods methods. A line of code holds
// a token: blank lines and comments do not count, so a limit is met by
// design, not by reflowing prose. Generated files are not counted. It
// also records each package's imports, for the layering rules its test
// holds every package of every module to.
package shape

import (
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The limits.
const (
	MaxLines   = 3000
	MaxMethods = 40
)

// Package is one directory's non-test, non-generated Go code, and what
// its tests import.
type Package struct {
	Dir         string
	Module      string          // the path of the module holding it
	Lines       int             // lines holding code, not only blanks or comments
	Methods     map[string]int  // receiver type → methods
	Imports     map[string]bool // import paths of its non-test files
	TestImports map[string]bool // import paths of its test files
}

// Measure walks the tree under root and measures each directory holding Go
// code; node_modules, testdata and hidden directories are skipped. A
// directory of tests alone is a Package of no lines.
func Measure(root string) ([]Package, error) {
	byDir := map[string]*Package{}
	modules := map[string]string{} // directory of a go.mod → its module path
	var order []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "node_modules" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if name == "go.mod" {
			src, err := os.ReadFile(path)
			if err == nil {
				modules[filepath.Dir(path)] = modulePath(src)
			}
			return err
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		dir := filepath.Dir(path)
		p := byDir[dir]
		if p == nil {
			p = &Package{Dir: dir, Methods: map[string]int{}, Imports: map[string]bool{}, TestImports: map[string]bool{}}
			byDir[dir] = p
			order = append(order, dir)
		}
		if strings.HasSuffix(name, "_test.go") {
			for _, imp := range f.Imports {
				p.TestImports[strings.Trim(imp.Path.Value, `"`)] = true
			}
			return nil
		}
		p.Lines += codeLines(src)
		for _, imp := range f.Imports {
			p.Imports[strings.Trim(imp.Path.Value, `"`)] = true
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv != nil && len(fn.Recv.List) == 1 {
				p.Methods[receiver(fn.Recv.List[0].Type)]++
			}
		}
		return nil
	})
	pkgs := make([]Package, len(order))
	for i, dir := range order {
		p := byDir[dir]
		for d := dir; p.Module == ""; d = filepath.Dir(d) {
			p.Module = modules[d]
			if d == root {
				break
			}
		}
		pkgs[i] = *p
	}
	return pkgs, err
}

// modulePath returns the path a go.mod file's module directive names.
func modulePath(src []byte) string {
	for line := range strings.Lines(string(src)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// codeLines counts the lines of src on which a token other than a
// comment starts or continues (a raw string spans several).
func codeLines(src []byte) int {
	fset := token.NewFileSet()
	file := fset.AddFile("", -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, 0)
	lines, last := 0, 0
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return lines
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at a line's end, not written
		}
		first := file.Line(pos)
		end := first + strings.Count(lit, "\n")
		lines += end - max(first, last+1) + 1
		last = max(last, end)
	}
}

// receiver is the name of a method's receiver type, without pointer or
// type parameters.
func receiver(t ast.Expr) string {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}
