package toolpin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idnhq/idn/mcpproxy/toolpin"
)

// benchTool is a tool of a typical size: a description of a few
// sentences and a schema of five properties (about 1 KiB of JSON).
func benchTool(i int) toolpin.Definition {
	return toolpin.Definition{
		Name:        fmt.Sprintf("repo.tool_%02d", i),
		Description: "Creates an issue in a repository. The title is required; the body takes Markdown. Labels must exist already.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"owner":{"type":"string","description":"Account that owns the repository"},
			"repo":{"type":"string","description":"Repository name"},"title":{"type":"string","maxLength":256},
			"body":{"type":"string","description":"Markdown body"},"labels":{"type":"array","items":{"type":"string"},"maxItems":20}},
			"required":["owner","repo","title"],"additionalProperties":false}`),
		Annotations: json.RawMessage(`{"read_only_hint":false,"destructive_hint":false,"idempotent_hint":false}`),
	}
}

// BenchmarkHash is what a listing costs per tool: "first" the first time
// a definition is seen (its canonical form), "again" every later time
// (Hash remembers the definitions it hashed lately).
func BenchmarkHash(b *testing.B) {
	d := benchTool(0)
	raw, _ := json.Marshal(d)
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := toolpin.Canonical(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("again", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := toolpin.Hash(d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCallCheck is what pinning adds to a tool call: the record of
// the connection, read through the keeper, and the tool's hash looked up.
func BenchmarkCallCheck(b *testing.B) {
	ctx := context.Background()
	k := &toolpin.Keeper{Backend: &toolpin.Memory{}}
	var l []toolpin.Listed
	for i := range 50 {
		d := benchTool(i)
		h, _ := toolpin.Hash(d)
		l = append(l, toolpin.Listed{Definition: d, SHA256: h})
	}
	if err := k.Observe(ctx, "c", l, true); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if !k.Pins("c").Allows(l[i%50].Definition.Name, l[i%50].SHA256) {
			b.Fatal("not allowed")
		}
	}
}

// BenchmarkObserveUnchanged is what a listing of 50 pinned tools costs
// once they are hashed: a look at each, no write.
func BenchmarkObserveUnchanged(b *testing.B) {
	ctx := context.Background()
	k := &toolpin.Keeper{Backend: &toolpin.Memory{}}
	var l []toolpin.Listed
	for i := range 50 {
		d := benchTool(i)
		h, _ := toolpin.Hash(d)
		l = append(l, toolpin.Listed{Definition: d, SHA256: h})
	}
	if err := k.Observe(ctx, "c", l, true); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := k.Observe(ctx, "c", l, true); err != nil {
			b.Fatal(err)
		}
	}
}
