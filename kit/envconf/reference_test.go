package envconf

import (
	"slices"
	"testing"
)

func TestCheckReference(t *testing.T) {
	ref := []byte("# X\n\n## Settings\n\n| Variable | Default | Meaning |\n|---|---|---|\n" +
		"| `A_ADDR` | `:80` | listen |\n| `B_TTL` | `5` | ttl |\n| `C_GONE` | none | removed |\n\n" +
		"## Errors\n\n| `A_ADDR` | 400 | not a setting |\n")
	vars := []Var{{Name: "A_ADDR", Default: ":80"}, {Name: "B_TTL", Default: "30"}, {Name: "D_NEW"}}
	got := CheckReference(vars, ref)
	want := []string{
		`B_TTL: the default cell "` + "`5`" + `" does not show the default ` + "`30`",
		"D_NEW is read but has no row in the settings tables",
		"C_GONE has a row in the settings tables but is not read",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("CheckReference =\n%q\nwant\n%q", got, want)
	}
}

func TestWithReference(t *testing.T) {
	ref := []byte("# X\n\n## Settings\n\n| Variable | Default | Meaning |\n|---|---|---|\n" +
		"| `A` | `1` | Attempts, see [retries](#retries); `0` means none. |\n\n## Other\n\n| `B` | x | not a setting |\n")
	got := WithReference([]Var{{Name: "A", Default: "1", Doc: "code text"}, {Name: "B", Doc: "kept"}}, ref)
	if got[0].Doc != "Attempts, see retries; 0 means none." || got[1].Doc != "kept" {
		t.Fatalf("WithReference = %+v", got)
	}
}
