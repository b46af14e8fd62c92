package toolpin

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Change is one difference between two definitions: the JSON Pointer
// (RFC 6901) of a member of the definition, and its canonical JSON
// before and after (absent on the side that lacks it).
type Change struct {
	Path   string          `json:"path"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// Diff returns the changes from before to after, in path order, down to
// the leaves that differ: "/description", "/input_schema/properties/amount/maximum".
// A reviewer reads what changed rather than two whole schemas.
func Diff(before, after Definition) ([]Change, error) {
	b, err := tree(before)
	if err != nil {
		return nil, err
	}
	a, err := tree(after)
	if err != nil {
		return nil, err
	}
	changes := []Change{}
	diffValue("", b, a, &changes)
	return changes, nil
}

func tree(d Definition) (any, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	c, err := Canonical(raw)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(c))
	dec.UseNumber()
	var v any
	err = dec.Decode(&v)
	return v, err
}

func diffValue(path string, before, after any, out *[]Change) {
	bo, bObj := before.(map[string]any)
	ao, aObj := after.(map[string]any)
	if bObj && aObj {
		for _, name := range Names(union(bo, ao)) {
			p := path + "/" + escapePointer(name)
			bv, bok := bo[name]
			av, aok := ao[name]
			switch {
			case !bok:
				*out = append(*out, Change{Path: p, After: encode(av)})
			case !aok:
				*out = append(*out, Change{Path: p, Before: encode(bv)})
			default:
				diffValue(p, bv, av, out)
			}
		}
		return
	}
	ba, bArr := before.([]any)
	aa, aArr := after.([]any)
	if bArr && aArr {
		for i := range max(len(ba), len(aa)) {
			p := path + "/" + strconv.Itoa(i)
			switch {
			case i >= len(ba):
				*out = append(*out, Change{Path: p, After: encode(aa[i])})
			case i >= len(aa):
				*out = append(*out, Change{Path: p, Before: encode(ba[i])})
			default:
				diffValue(p, ba[i], aa[i], out)
			}
		}
		return
	}
	if b, a := encode(before), encode(after); !bytes.Equal(b, a) {
		*out = append(*out, Change{Path: path, Before: b, After: a})
	}
}

func union(a, b map[string]any) map[string]bool {
	u := make(map[string]bool, len(a)+len(b))
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

// encode is the canonical JSON of a value of a canonical tree.
func encode(v any) json.RawMessage {
	raw, _ := json.Marshal(v)
	c, err := Canonical(raw)
	if err != nil {
		return raw
	}
	return c
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
