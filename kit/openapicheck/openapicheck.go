// Package openapicheck lets tests hold an OpenAPI 3.1 document to the
// routes a server really registers: it checks that the document is 3.1,
// that every $ref resolves and every path parameter is declared, and it
// turns net/http ServeMux patterns into the document's "METHOD /path" keys
// so the two lists can be compared. It also holds real responses to the
// document (CheckResponse, Watch): status, media type and body schema.
package openapicheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// Document is a parsed OpenAPI document.
type Document struct {
	raw  any
	ops  []string
	errs []string

	mu       sync.Mutex
	compiled map[string]*jsonschema.Resolved // by the schema's JSON text
}

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

var templateParam = regexp.MustCompile(`\{([^}/]+)\}`)

// Parse reads doc and checks it: no object repeats a key, "openapi" is
// "3.1.0", every local $ref resolves, every path template parameter is
// declared as a path parameter, every operation has a unique operationId
// and at least one response. All problems are returned together.
func Parse(doc []byte) (*Document, error) {
	d := &Document{}
	if err := json.Unmarshal(doc, &d.raw); err != nil {
		return nil, fmt.Errorf("openapicheck: not JSON: %w", err)
	}
	d.errs = duplicateKeys(doc)
	root, ok := d.raw.(map[string]any)
	if !ok {
		return nil, errors.New("openapicheck: the document is not a JSON object")
	}
	if v, _ := root["openapi"].(string); v != "3.1.0" {
		d.errs = append(d.errs, fmt.Sprintf(`"openapi" is %q, want "3.1.0"`, v))
	}
	d.walkRefs(d.raw, "#")
	paths, _ := root["paths"].(map[string]any)
	if len(paths) == 0 {
		d.errs = append(d.errs, "no paths")
	}
	ids := map[string]string{}
	for path, v := range paths {
		item, _ := v.(map[string]any)
		for _, m := range methods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			key := strings.ToUpper(m) + " " + path
			d.ops = append(d.ops, key)
			if id, _ := op["operationId"].(string); id == "" {
				d.errs = append(d.errs, key+": no operationId")
			} else if other, dup := ids[id]; dup {
				d.errs = append(d.errs, fmt.Sprintf("%s: operationId %q also names %s", key, id, other))
			} else {
				ids[id] = key
			}
			if r, _ := op["responses"].(map[string]any); len(r) == 0 {
				d.errs = append(d.errs, key+": no responses")
			}
			declared := map[string]bool{}
			for _, list := range []any{item["parameters"], op["parameters"]} {
				ps, _ := list.([]any)
				for _, p := range ps {
					p, _ := d.deref(p).(map[string]any)
					if p["in"] == "path" {
						name, _ := p["name"].(string)
						declared[name] = true
					}
				}
			}
			for _, m := range templateParam.FindAllStringSubmatch(path, -1) {
				if !declared[m[1]] {
					d.errs = append(d.errs, fmt.Sprintf("%s: path parameter %q is not declared", key, m[1]))
				}
			}
		}
	}
	slices.Sort(d.ops)
	slices.Sort(d.errs)
	if len(d.errs) > 0 {
		return d, errors.New("openapicheck: " + strings.Join(d.errs, "; "))
	}
	return d, nil
}

// duplicateKeys names, as JSON Pointers, the keys an object of doc (valid
// JSON) repeats. encoding/json keeps the last of them silently, as most
// parsers do, while some tools refuse the whole document.
func duplicateKeys(doc []byte) []string {
	type frame struct {
		at   string
		keys map[string]bool // nil for an array
		next int             // an array's next index
	}
	var stack []*frame
	var dups []string
	key := "" // the member name whose value comes next
	dec := json.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if err != nil {
			return dups
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil && key == "" {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k := tok.(string) // an object's member name
			if top.keys[k] {
				dups = append(dups, fmt.Sprintf("%s: key %q appears twice", pointer(top.at, k), k))
			}
			top.keys[k], key = true, k
			continue
		}
		at := ""
		switch {
		case top == nil:
		case top.keys != nil:
			at, key = pointer(top.at, key), ""
		default:
			if d, ok := tok.(json.Delim); ok && d == ']' {
				stack = stack[:len(stack)-1]
				continue
			}
			at = fmt.Sprintf("%s/%d", top.at, top.next)
			top.next++
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{at: at, keys: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, &frame{at: at})
		}
	}
}

// pointer is the JSON Pointer of member name under at.
func pointer(at, name string) string {
	return at + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

// Operations returns every operation as "METHOD /path", sorted.
func (d *Document) Operations() []string { return slices.Clone(d.ops) }

func (d *Document) walkRefs(v any, at string) {
	switch v := v.(type) {
	case map[string]any:
		if r, ok := v["$ref"].(string); ok {
			if _, err := d.resolve(r); err != nil {
				d.errs = append(d.errs, at+": "+err.Error())
			}
		}
		for k, c := range v {
			d.walkRefs(c, at+"/"+k)
		}
	case []any:
		for i, c := range v {
			d.walkRefs(c, fmt.Sprintf("%s/%d", at, i))
		}
	}
}

// deref follows v's $ref, if it has one that resolves.
func (d *Document) deref(v any) any {
	if m, ok := v.(map[string]any); ok {
		if r, ok := m["$ref"].(string); ok {
			if t, err := d.resolve(r); err == nil {
				return t
			}
		}
	}
	return v
}

// resolve follows a local JSON Pointer reference ("#/components/…").
func (d *Document) resolve(ref string) (any, error) {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not local", ref)
	}
	cur := d.raw
	if ptr == "" {
		return cur, nil
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
	}
	return cur, nil
}

// Route turns a ServeMux pattern ("GET /v1/items/{id}") into the
// document's key for it ("GET /v1/items/{id}"): "{$}" ends a path and
// "{name...}" becomes "{name}". A pattern without a method or with a host
// is refused: it would answer methods or hosts the document cannot list.
func Route(pattern string) (string, error) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok || method == "" || !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("openapicheck: pattern %q needs a method and a path without host", pattern)
	}
	if strings.HasSuffix(path, "/") {
		return "", fmt.Errorf("openapicheck: pattern %q matches a whole subtree; end it with {$} or a {name...} wildcard", pattern)
	}
	path = strings.TrimSuffix(path, "{$}")
	path = strings.ReplaceAll(path, "...}", "}")
	return method + " " + path, nil
}

// Diff returns the routes missing from ops and the operations missing from
// routes.
func Diff(routes, ops []string) (notDocumented, notRouted []string) {
	for _, r := range routes {
		if !slices.Contains(ops, r) {
			notDocumented = append(notDocumented, r)
		}
	}
	for _, o := range ops {
		if !slices.Contains(routes, o) {
			notRouted = append(notRouted, o)
		}
	}
	return notDocumented, notRouted
}
