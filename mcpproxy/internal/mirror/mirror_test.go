package mirror_test

import (
	"encoding/json"
	"testing"

	"github.com/idnhq/idn/mcpproxy/internal/mirror"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCapabilities(t *testing.T) {
	t.Parallel()
	up := &mcp.ServerCapabilities{
		Resources:    &mcp.ResourceCapabilities{Subscribe: true},
		Prompts:      &mcp.PromptCapabilities{},
		Completions:  &mcp.CompletionCapabilities{},
		Experimental: map[string]any{"x": true},
	}
	tests := []struct {
		name                       string
		up                         *mcp.ServerCapabilities
		resources, prompts         bool
		wantResources, wantPrompts bool
		wantCompletions            bool
	}{
		{"nothing exposed hides resources, prompts and completions", up, false, false, false, false, false},
		{"resources exposed", up, true, false, true, false, true},
		{"prompts exposed", up, false, true, false, true, true},
		{"a server without capabilities still has tools", nil, true, true, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mirror.Capabilities(tt.up, tt.resources, tt.prompts)
			if got.Tools == nil || (got.Resources != nil) != tt.wantResources || (got.Prompts != nil) != tt.wantPrompts ||
				(got.Completions != nil) != tt.wantCompletions || got.Experimental != nil {
				t.Errorf("Capabilities = %+v", got)
			}
		})
	}
}

func TestCompletable(t *testing.T) {
	t.Parallel()
	prompt := &mcp.CompleteReference{Type: "ref/prompt", Name: "p"}
	resource := &mcp.CompleteReference{Type: "ref/resource", URI: "file:///{x}"}
	if mirror.Completable(prompt, true, false) || !mirror.Completable(prompt, false, true) ||
		!mirror.Completable(resource, true, false) || mirror.Completable(resource, false, true) ||
		mirror.Completable(nil, true, true) || mirror.Completable(&mcp.CompleteReference{Type: "ref/other"}, true, true) {
		t.Error("a completion passes where its subject is not exposed, or not where it is")
	}
}

func TestNotificationParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, raw string
		ok                bool
	}{
		{"tools changed", "notifications/tools/list_changed", ``, true},
		{"resource updated", "notifications/resources/updated", `{"uri":"file:///a"}`, true},
		{"null params", "notifications/prompts/list_changed", `null`, true},
		{"the gateway's own cancellation is not passed", "notifications/cancelled", `{"requestId":1}`, false},
		{"unknown method", "notifications/whatever", `{}`, false},
		{"params of the wrong shape", "notifications/resources/updated", `[1]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := mirror.NotificationParams(tt.method, json.RawMessage(tt.raw)); ok != tt.ok {
				t.Errorf("NotificationParams(%s, %s) ok = %v", tt.method, tt.raw, ok)
			}
		})
	}
}

func TestDefaultCacheScope(t *testing.T) {
	t.Parallel()
	res := &mcp.ListToolsResult{}
	mirror.DefaultCacheScope(res)
	if res.CacheScope != "public" {
		t.Errorf("scope = %q", res.CacheScope)
	}
}
