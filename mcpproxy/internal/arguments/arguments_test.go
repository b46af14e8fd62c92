package arguments

import (
	"encoding/json"
	"testing"
)

const echoSchema = `{"type":"object","properties":{"text":{"type":"string","maxLength":10},"count":{"type":"integer","minimum":1},"tags":{"type":"array","items":{"type":"string"}}},"required":["text"],"additionalProperties":false}`

func TestArgumentsCheck(t *testing.T) {
	t.Parallel()
	ts, err := Compile(json.RawMessage(echoSchema))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		body  string
		paths []string // nil = valid
	}{
		{"valid", `{"text":"hi","count":2}`, nil},
		{"missing required", `{"count":2}`, []string{"/text"}},
		{"wrong type", `{"text":5}`, []string{"/text"}},
		{"too long", `{"text":"01234567890"}`, []string{"/text"}},
		{"nested array item", `{"text":"a","tags":["x",3]}`, []string{"/tags/1"}},
		{"two failures", `{"text":1,"count":0}`, []string{"/count", "/text"}},
		{"smuggled extra property", `{"text":"a","admin":true}`, []string{"/admin"}},
		{"pointer escaping", `{"text":"a","a/b~c":1}`, []string{"/a~1b~0c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, _, err := Decode([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			fails := ts.Check(args)
			var paths []string
			for _, f := range fails {
				paths = append(paths, f.Path)
				if f.Message == "" {
					t.Errorf("failure at %q has no message", f.Path)
				}
			}
			if len(paths) != len(tt.paths) {
				t.Fatalf("paths = %q, want %q (%+v)", paths, tt.paths, fails)
			}
			for i := range paths {
				if paths[i] != tt.paths[i] {
					t.Fatalf("paths = %q, want %q", paths, tt.paths)
				}
			}
		})
	}
}

func TestDecodeArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		ok         bool
	}{
		{"object", `{"a":1}`, true},
		{"empty body is empty object", "", true},
		{"whitespace body", " \n", true},
		{"array", `[1]`, false},
		{"string", `"x"`, false},
		{"null", `null`, false},
		{"trailing object smuggled", `{"a":1}{"b":2}`, false},
		{"trailing garbage", `{"a":1} x`, false},
		{"stray closing brace", `{} }`, false},
		{"truncated", `{"a":`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, raw, err := Decode([]byte(tt.body))
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if tt.ok && !json.Valid(raw) {
				t.Fatalf("forwarded bytes %q are not JSON", raw)
			}
		})
	}
}

func FuzzDecodeArguments(f *testing.F) {
	ts, err := Compile(json.RawMessage(echoSchema))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{`{"text":"hi"}`, ``, `[]`, `{"text":1,"tags":[1,{}]}`, `{"a":1}{}`, `{"text":"\ud800"}`, `{"count":1e999}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		args, raw, err := Decode(body)
		if err != nil {
			return
		}
		var back map[string]any
		if json.Unmarshal(raw, &back) != nil {
			t.Fatalf("accepted %q but forwarded bytes do not decode as an object", body)
		}
		fails := ts.Check(args)
		if (len(fails) == 0) != (ts.resolved.Validate(args) == nil) {
			t.Fatalf("check and Validate disagree on %q: %+v", body, fails)
		}
	})
}
