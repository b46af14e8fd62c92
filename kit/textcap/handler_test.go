package textcap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
)

type stringer string

func (s stringer) String() string { return string(s) }

type valuer string

func (v valuer) LogValue() slog.Value { return slog.StringValue(string(v)) }

// TestHandler: whatever a record carries, each value the JSON line holds
// is at most the bound; short values pass untouched.
func TestHandler(t *testing.T) {
	huge := strings.Repeat("n", 100_000)
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewJSONHandler(&buf, nil), 16))
	log = log.With("preset", huge).WithGroup("g")
	log.Info(huge, "tool", huge, "error", errors.New(huge), "stringer", stringer(huge), "valuer", valuer(huge),
		"group", slog.GroupValue(slog.String("inner", huge)), "n", 7, "addr", netip.MustParseAddr("192.0.2.1"))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > 512 {
		t.Errorf("logged %d bytes", buf.Len())
	}
	g := line["g"].(map[string]any)
	for k, v := range map[string]any{"msg": line["msg"], "preset": line["preset"], "tool": g["tool"], "error": g["error"],
		"stringer": g["stringer"], "valuer": g["valuer"], "inner": g["group"].(map[string]any)["inner"]} {
		if v != huge[:16] {
			t.Errorf("%s = %v, want %q", k, v, huge[:16])
		}
	}
	if g["n"] != 7.0 || g["addr"] != "192.0.2.1" {
		t.Errorf("short values changed: %v", g)
	}
}

// A record with nothing to clip is not copied.
func BenchmarkHandlerPlain(b *testing.B) {
	log := slog.New(Handler(slog.NewJSONHandler(io.Discard, nil), Name))
	ctx := context.Background()
	for b.Loop() {
		log.LogAttrs(ctx, slog.LevelInfo, "decision", slog.String("kind", "mcp"), slog.String("tool", "get_weather"))
	}
}
