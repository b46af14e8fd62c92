// Package arguments parses the arguments of an MCP tool call and checks
// them against the tool's input_schema, naming every failing value by its
// JSON Pointer.
package arguments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Failure is one place where call arguments break the tool's
// input_schema. Path is a JSON Pointer (RFC 6901) into the arguments; ""
// is the arguments object itself.
type Failure struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Decode parses a call body: a single JSON object (an empty body
// means {}). It returns the decoded value for validation and the exact bytes
// to forward, so numbers keep their precision upstream.
func Decode(body []byte) (map[string]any, json.RawMessage, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return map[string]any{}, json.RawMessage("{}"), nil
	}
	if trimmed[0] != '{' {
		return nil, nil, errors.New("arguments must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, nil, fmt.Errorf("arguments are not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("arguments must be a single JSON object")
	}
	return args, json.RawMessage(trimmed), nil
}

// Schema is a tool's input_schema, resolved once per discovery.
type Schema struct {
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
}

// Compile resolves a tool's input_schema; an empty one is {"type":"object"}.
func Compile(raw json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("mcpproxy: tool input_schema is not a JSON Schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: tool input_schema does not resolve: %w", err)
	}
	return &Schema{schema: &s, resolved: rs}, nil
}

// Check validates args and, when they fail, names the failing paths.
func (ts *Schema) Check(args map[string]any) []Failure {
	err := ts.resolved.Validate(args)
	if err == nil {
		return nil
	}
	fails := locate(ts.schema, args, "")
	if len(fails) == 0 {
		fails = []Failure{{Path: "", Message: leafMessage(err)}}
	}
	sort.Slice(fails, func(i, j int) bool { return fails[i].Path < fails[j].Path })
	return fails
}

// locate walks the schema's properties and items alongside the instance to
// find the JSON Pointers of the values that fail. The validator itself only
// reports the first failure by schema location; this gives callers the
// instance paths of every failing value. Where the schema cannot be taken
// apart (references, combinators), the nearest enclosing path is reported.
func locate(s *jsonschema.Schema, v any, path string) []Failure {
	var out []Failure
	switch val := v.(type) {
	case map[string]any:
		for _, name := range s.Required {
			if _, ok := val[name]; !ok {
				out = append(out, Failure{Path: path + "/" + escapePointer(name), Message: "required property is missing"})
			}
		}
		for name, pv := range val {
			p := path + "/" + escapePointer(name)
			sub, ok := s.Properties[name]
			if !ok {
				if isFalseSchema(s.AdditionalProperties) {
					out = append(out, Failure{Path: p, Message: "property is not allowed"})
					continue
				}
				sub = s.AdditionalProperties
			}
			out = append(out, locateSub(sub, pv, p)...)
		}
	case []any:
		if s.Items != nil {
			for i, item := range val {
				out = append(out, locateSub(s.Items, item, path+"/"+strconv.Itoa(i))...)
			}
		}
	}
	return out
}

// locateSub checks v against a sub-schema on its own and descends into it.
func locateSub(sub *jsonschema.Schema, v any, path string) []Failure {
	if sub == nil {
		return nil
	}
	rs, err := sub.Resolve(nil)
	if err != nil {
		// A sub-schema that only resolves within its root (a $ref): the
		// whole-document validation already failed, so stop here.
		return nil
	}
	verr := rs.Validate(v)
	if verr == nil {
		return nil
	}
	if deeper := locate(sub, v, path); len(deeper) > 0 {
		return deeper
	}
	return []Failure{{Path: path, Message: leafMessage(verr)}}
}

func isFalseSchema(s *jsonschema.Schema) bool {
	// The validator decodes `false` as {"not":{}}.
	return s != nil && s.Not != nil && reflect.ValueOf(*s.Not).IsZero()
}

// leafMessage drops the validator's "validating <schema>: " prefixes,
// keeping the reason.
func leafMessage(err error) string {
	msg := err.Error()
	for {
		rest, ok := strings.CutPrefix(msg, "validating ")
		if !ok {
			return msg
		}
		i := strings.Index(rest, ": ")
		if i < 0 {
			return msg
		}
		msg = rest[i+2:]
	}
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
