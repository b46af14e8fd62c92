package scrub_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/idnhq/idn/mcpproxy/internal/scrub"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestScrub(t *testing.T) {
	t.Parallel()
	ep, _ := url.Parse("https://user:pw-SECRET@mcp.example/v1/mcp?api_key=Q-SECRET&x=1")
	sc := scrub.New(ep, []string{"H-SECRET+/=", ""})
	tests := []struct {
		name, in string
	}{
		{"url error quotes the query", `Post "https://mcp.example/v1/mcp?api_key=Q-SECRET&x=1": dial tcp: refused`},
		{"userinfo in url", `Post "https://user:pw-SECRET@mcp.example/v1/mcp": EOF`},
		{"bare secret value", `upstream said Q-SECRET is invalid`},
		{"query-escaped secret", `token=H-SECRET%2B%2F%3D`},
		{"path-escaped secret", `/t/H-SECRET+%2F=`},
		{"caller secret", `vault: token H-SECRET+/= rejected`},
		{"upper-case scheme", `HTTPS://mcp.example/v1/mcp?api_key=Q-SECRET`},
		{"url at end without quotes", `failed: http://other.example/?token=abc`},
		{"unparsable url", "http://[::1%zz/?api_key=Q-SECRET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sc.Scrub(tt.in)
			for _, s := range []string{"SECRET", "api_key", "token=abc"} {
				if strings.Contains(got, s) {
					t.Errorf("scrub(%q) = %q still contains %q", tt.in, got, s)
				}
			}
		})
	}
	if got := sc.Scrub(`Post "https://mcp.example/v1/mcp?a=b": refused`); got != `Post "https://mcp.example/v1/mcp?[redacted]": refused` {
		t.Errorf("scrub keeps too little or too much: %q", got)
	}
}

func TestLaunderToolResult(t *testing.T) {
	t.Parallel()
	const secret = "tok/SECRET+1"
	sc := scrub.New(nil, []string{"Bearer " + secret, secret})
	var res mcp.CallToolResult
	// The upstream escapes the credential in its JSON as it likes.
	wire := `{"content":[{"type":"text","text":"you sent Bearer tok\/SECRET+1"},
		{"type":"resource_link","uri":"https://x.example/?k=tok%2FSECRET%2B1","name":"n"}],
		"structuredContent":{"headers":{"Authorization":"Bearer tok\u002fSECRET+1"},"tok/SECRET+1":1.50},"isError":false}`
	if err := json.Unmarshal([]byte(wire), &res); err != nil {
		t.Fatal(err)
	}
	clean, err := scrub.Launder(sc, &res)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(clean)
	if strings.Contains(string(out), "SECRET") || !strings.Contains(string(out), `"[redacted]":1.5`) ||
		!strings.Contains(string(out), `you sent [redacted]`) {
		t.Fatalf("laundered result = %s", out)
	}
	plain := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "nothing to hide"}}}
	if got, err := scrub.Launder(sc, plain); err != nil || got != plain {
		t.Fatalf("a clean result was rebuilt: %v, %v", got, err)
	}
}

// TestScrubReplacesOnce: a secret found in text is replaced by one mark,
// and the mark is not searched again, so a secret that occurs inside
// "[redacted]" (or is listed in several identical forms) cannot nest marks.
func TestScrubReplacesOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"one-letter secret listed in three identical forms", []string{"t"}, "everything", "every[redacted]hing"},
		{"secret inside the mark", []string{"redacted", "redacted"}, "was redacted twice", "was [redacted] twice"},
		{"longest form wins at a position", []string{"ab", "abcd"}, "xabcdx abx", "x[redacted]x [redacted]x"},
		{"adjacent occurrences", []string{"k3y-secret"}, "k3y-secretk3y-secret", "[redacted][redacted]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := scrub.New(nil, tt.secrets)
			if got := sc.Replace(tt.in); got != tt.want {
				t.Errorf("replace(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := sc.Scrub(tt.in); got != tt.want {
				t.Errorf("scrub(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// An OAuth access token is known only once the transport sends it, and
// changes at each refresh: Live secrets are scrubbed as Redact's are,
// however the server escaped them in its JSON.
func TestLiveSecretsEchoedEscaped(t *testing.T) {
	t.Parallel()
	tokens := []string{"abc-TOKEN-1"}
	sc := scrub.New(nil, []string{"static-SECRET"}).Live(func() []string { return tokens })
	var res mcp.CallToolResult
	wire := `{"content":[{"type":"text","text":"auth=Bearer \u0061bc-TOKEN-1 static-SECRET"}]}`
	if err := json.Unmarshal([]byte(wire), &res); err != nil {
		t.Fatal(err)
	}
	clean, err := scrub.Launder(sc, &res)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(clean)
	if strings.Contains(string(raw), "TOKEN") || strings.Contains(string(raw), "SECRET") {
		t.Fatalf("the escaped token came through: %s", raw)
	}
	tokens = []string{"abc-TOKEN-2"} // refreshed
	if got := sc.Scrub("saw abc-TOKEN-2 and static-SECRET"); got != "saw [redacted] and [redacted]" {
		t.Fatalf("after a refresh: %q", got)
	}
}

// The engine builds a connection's Scrubber at each request: what the
// live secrets add to scrubbing one tool result.
func BenchmarkLaunderPerRequest(b *testing.B) {
	ep, _ := url.Parse("https://mcp.example.com/mcp")
	static := []string{"static-secret-value", "Bearer static-secret-value"}
	tokens := []string{"eyJhbGciOiJSUzI1NiJ9.access-token-of-alice", "eyJhbGciOiJSUzI1NiJ9.access-token-of-bob"}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("a tool result without secrets ", 20)}}}
	for _, live := range []bool{false, true} {
		b.Run(fmt.Sprint("live=", live), func(b *testing.B) {
			for b.Loop() {
				sc := scrub.New(ep, static)
				if live {
					sc.Live(func() []string { return tokens })
				}
				if _, err := scrub.Launder(sc, res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
