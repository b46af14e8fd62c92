package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzMembers holds members to encoding/json's own reading of an object's
// members, token by token: the same verdict and the same values for any
// input.
func FuzzMembers(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"s":"}\"]"}}}`,
		` { "id" : [1, {"a":[]}] , "method":null } `,
		`{"id":1,"id":2}`,
		`{"Id":1}`,
		`{"i\u0064":true}`,
		`{"id":-1.5e3,"params":"x\\"}`,
		`{}`,
		`{"id":1}{}`,
		`{"id":1,}`,
		`[{"id":1}]`,
		`"id"`,
		``,
	} {
		f.Add([]byte(seed))
	}
	names := []string{"jsonrpc", "id", "method", "params", "i\"d", ""}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := members(raw, names...)
		want, wantOK := tokenMembers(raw, names...)
		if ok != wantOK || !cmp.Equal(got, want) {
			t.Fatalf("members(%q) = %q, %v; encoding/json reads %q, %v", raw, got, ok, want, wantOK)
		}
	})
}

// tokenMembers is members as encoding/json's decoder reads the object.
func tokenMembers(raw []byte, names ...string) (map[string]json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	out := make(map[string]json.RawMessage, len(names))
	for dec.More() {
		tok, err := dec.Token()
		name, _ := tok.(string)
		if _, seen := out[name]; err != nil || seen || !slices.Contains(names, name) {
			return nil, false
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return nil, false
		}
		out[name] = v
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return out, true
}
