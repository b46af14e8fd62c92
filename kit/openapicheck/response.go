package openapicheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	pathpkg "path"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// The bodies are validated with github.com/google/jsonschema-go. An
// OpenAPI 3.1 Schema Object is a JSON Schema draft 2020-12 schema, and
// that package implements draft 2020-12 and runs the official JSON Schema
// Test Suite. The module already needs it (the MCP SDK validates tool
// arguments with it), so checking responses adds no dependency. What it
// leaves to this file is the OpenAPI part: picking the operation, the
// response by status and the media type, and resolving the document's
// "#/components/schemas/…" references.

// errNoBody is a response without the body the document lists.
var errNoBody = errors.New("the document lists content, the response has no body")

// CheckResponse reports how a response differs from the document:
//   - the request's method and path must name an operation;
//   - the status must be one of its responses (or a range such as "4XX",
//     or "default");
//   - the Content-Type must be one of that response's media types;
//   - a response without content must have no body;
//   - a JSON body must validate against the media type's schema.
//
// A request whose path names no operation is held to the document's Error
// schema when the answer is an error, since no document can list the
// paths it does not serve.
//
// The redirect net/http's ServeMux answers for a path that is not clean
// ("/a/../b") is outside any document and passes.
func (d *Document) CheckResponse(method, path string, status int, header http.Header, body []byte) error {
	if (status == http.StatusMovedPermanently || status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect) &&
		cleanPath(path) != path {
		return nil
	}
	key, op := d.operation(method, path)
	if op == nil {
		if status >= 400 {
			return d.checkError(header, body)
		}
		return fmt.Errorf("%s %s: answered %d, but the document has no such operation", method, path, status)
	}
	responses, _ := op["responses"].(map[string]any)
	found, ok := pickResponse(responses, status)
	if !ok {
		return fmt.Errorf("%s: status %d is not documented", key, status)
	}
	res, _ := d.deref(found).(map[string]any)
	content, _ := res["content"].(map[string]any)
	ctype := header.Get("Content-Type")
	if len(content) == 0 {
		if len(body) > 0 {
			return fmt.Errorf("%s %d: the document says no content, the response has a %d-byte %q body", key, status, len(body), ctype)
		}
		return nil
	}
	if ctype == "" && len(body) == 0 {
		return fmt.Errorf("%s %d: %w", key, status, errNoBody)
	}
	mediaKey, media, ok := pickMedia(content, ctype)
	if !ok {
		return fmt.Errorf("%s %d: Content-Type %q is not documented", key, status, ctype)
	}
	if len(body) == 0 {
		return fmt.Errorf("%s %d: %w", key, status, errNoBody)
	}
	schema, ok := media["schema"]
	if !ok || !isJSON(mediaKey, ctype) {
		return nil
	}
	where := fmt.Sprintf("%s %d %s", key, status, mediaKey)
	return d.validate(where, schema, body)
}

func (d *Document) checkError(header http.Header, body []byte) error {
	comps, _ := d.raw.(map[string]any)["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	if _, ok := schemas["Error"]; !ok {
		return nil
	}
	if mt, _, _ := mime.ParseMediaType(header.Get("Content-Type")); mt != "application/json" {
		return fmt.Errorf("an error on an undocumented path: Content-Type %q, want application/json", header.Get("Content-Type"))
	}
	return d.validate("an error on an undocumented path", map[string]any{"$ref": "#/components/schemas/Error"}, body)
}

// cleanPath is path as http.ServeMux cleans it before routing.
func cleanPath(p string) string {
	c := pathpkg.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// operation finds the operation the request addresses. Literal segments
// win over template parameters, so /v1/namespaces/claims is not taken
// for /v1/namespaces/{namespace}; a parameter that ends a template may
// take the rest of the path ("{path...}" in a ServeMux pattern).
func (d *Document) operation(method, path string) (string, map[string]any) {
	paths, _ := d.raw.(map[string]any)["paths"].(map[string]any)
	m := strings.ToLower(method)
	if m == "head" {
		m = "get"
	}
	var best string
	bestScore := -1
	for tmpl, item := range paths {
		ops, _ := item.(map[string]any)
		if _, ok := ops[m].(map[string]any); !ok {
			continue
		}
		if score, ok := matchPath(tmpl, path); ok && score > bestScore {
			best, bestScore = tmpl, score
		}
	}
	if bestScore < 0 {
		return "", nil
	}
	op := paths[best].(map[string]any)[m].(map[string]any)
	return strings.ToUpper(method) + " " + best, op
}

// matchPath scores a match: two points per literal segment, one per
// parameter taking one segment, none for a final parameter taking more.
func matchPath(tmpl, path string) (int, bool) {
	ts := strings.Split(strings.TrimPrefix(tmpl, "/"), "/")
	ps := strings.Split(strings.TrimPrefix(path, "/"), "/")
	score := 0
	for i, t := range ts {
		param := strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}")
		if i >= len(ps) {
			return 0, false
		}
		switch {
		case param && i == len(ts)-1 && len(ps) > len(ts):
			return score, true
		case param:
			if ps[i] == "" {
				return 0, false
			}
			score++
		case t == ps[i]:
			score += 2
		default:
			return 0, false
		}
	}
	return score, len(ps) == len(ts)
}

func pickResponse(responses map[string]any, status int) (any, bool) {
	s := strconv.Itoa(status)
	if r, ok := responses[s]; ok {
		return r, true
	}
	if r, ok := responses[s[:1]+"XX"]; ok {
		return r, true
	}
	r, ok := responses["default"]
	return r, ok
}

// pickMedia matches the Content-Type against the documented media types:
// the whole value first (a documented type may carry parameters, as a
// DID resolution profile does), then the bare type, then a wildcard.
func pickMedia(content map[string]any, ctype string) (string, map[string]any, bool) {
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		return "", nil, false
	}
	get := func(k string) (string, map[string]any, bool) {
		m, ok := content[k].(map[string]any)
		return k, m, ok
	}
	for k := range content {
		kt, kp, err := mime.ParseMediaType(k)
		if err != nil || kt != mt || len(kp) == 0 {
			continue
		}
		same := true
		for name, v := range kp {
			same = same && params[name] == v
		}
		if same {
			return get(k)
		}
	}
	if k, m, ok := get(mt); ok {
		return k, m, ok
	}
	if k, m, ok := get(strings.Split(mt, "/")[0] + "/*"); ok {
		return k, m, ok
	}
	return get("*/*")
}

func isJSON(mediaKey, ctype string) bool {
	for _, v := range []string{mediaKey, ctype} {
		mt, _, _ := mime.ParseMediaType(v)
		if mt == "application/json" || strings.HasSuffix(mt, "+json") {
			return true
		}
	}
	return false
}

// validate checks body against schema, whose references into
// "#/components/schemas/" are resolved in the document.
func (d *Document) validate(where string, schema any, body []byte) error {
	resolved, err := d.compile(schema)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("%s: the body is not JSON: %v", where, err)
	}
	if err := resolved.Validate(v); err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	return nil
}

// compile turns a Schema Object into a resolved JSON Schema: the
// document's component schemas become its $defs, and references to them
// are rewritten to match. Compiled schemas are kept by their JSON text.
func (d *Document) compile(schema any) (*jsonschema.Resolved, error) {
	src, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.compiled[string(src)]; ok {
		return r, nil
	}
	comps, _ := d.raw.(map[string]any)["components"].(map[string]any)
	defs, _ := comps["schemas"].(map[string]any)
	root, ok := rewriteRefs(schema).(map[string]any)
	if !ok {
		return nil, errors.New("openapicheck: a schema is not an object")
	}
	root["$defs"] = rewriteRefs(defs)
	raw, err := json.Marshal(root)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("openapicheck: schema: %w", err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("openapicheck: schema: %w", err)
	}
	if d.compiled == nil {
		d.compiled = map[string]*jsonschema.Resolved{}
	}
	d.compiled[string(src)] = r
	return r, nil
}

// rewriteRefs copies v with "#/components/schemas/X" references turned
// into "#/$defs/X".
func rewriteRefs(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, c := range v {
			if s, ok := c.(string); ok && k == "$ref" {
				if name, ok := strings.CutPrefix(s, "#/components/schemas/"); ok {
					c = "#/$defs/" + name
				}
			}
			out[k] = rewriteRefs(c)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, c := range v {
			out[i] = rewriteRefs(c)
		}
		return out
	}
	return v
}
