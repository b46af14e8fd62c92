package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// TestConnectionShowsOnlyItsModesFields: each auth mode's connection
// object carries the fields that mode uses and none of the others', in
// every answer that returns it.
func TestConnectionShowsOnlyItsModesFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, tt := range []struct {
		name, body    string
		want, notWant map[string]any
	}{
		{"bearer", `"auth_mode":"bearer","auth_secret_key":"k"`,
			map[string]any{"auth_prefix": "Bearer ", "auth_secret_key": "k"}, map[string]any{"auth_header_name": nil, "auth_query_param": nil}},
		{"header_key", `"auth_mode":"header_key","auth_secret_key":"k"`,
			map[string]any{"auth_header_name": "X-API-Key", "auth_secret_key": "k"}, map[string]any{"auth_query_param": nil}},
		{"header_key with a prefix", `"auth_mode":"header_key","auth_header_name":"X-Token","auth_prefix":"Token ","auth_secret_key":"k"`,
			map[string]any{"auth_header_name": "X-Token", "auth_prefix": "Token "}, map[string]any{"auth_query_param": nil}},
		{"query_param", `"auth_mode":"query_param","auth_query_param":"key","auth_secret_key":"k"`,
			map[string]any{"auth_query_param": "key", "auth_secret_key": "k"}, map[string]any{"auth_header_name": nil, "auth_prefix": nil}},
		{"mcp without a credential", `"protocol":"mcp"`,
			map[string]any{"mcp_transport": "streamable_http"}, map[string]any{"auth_header_name": nil, "auth_query_param": nil, "auth_prefix": nil, "auth_mode": nil}},
	} {
		id := fmt.Sprintf("c%d", len(e.vault.Connections()))
		created := e.do("POST", "/api/admin/connections", fmt.Sprintf(`{"id":%q,"base_url":"https://api.example",%s,"secrets":{"k":"key-secret-1"}}`, id, tt.body))
		wantStatus(t, created, http.StatusCreated, "")
		got := e.do("GET", "/api/admin/connections/"+id, "")
		patched := e.do("PATCH", "/api/admin/connections/"+id, `{"name":"renamed"}`)
		list := e.do("GET", "/api/admin/connections", "")
		var all []map[string]any
		if err := json.Unmarshal(list.Body, &all); err != nil {
			t.Fatalf("list: %s", list.Body)
		}
		var listed map[string]any
		for _, c := range all {
			if c["id"] == id {
				listed = c
			}
		}
		for answer, c := range map[string]map[string]any{"create": created.json(t), "get": got.json(t), "patch": patched.json(t), "list": listed} {
			for k, v := range tt.want {
				if c[k] != v {
					t.Errorf("%s: %s: %s = %v, want %v", tt.name, answer, k, c[k], v)
				}
			}
			for k := range tt.notWant {
				if _, ok := c[k]; ok {
					t.Errorf("%s: %s shows %s = %v, which its mode does not use", tt.name, answer, k, c[k])
				}
			}
		}
	}

	// The stored default of another mode is there once the mode changes.
	r := e.do("PATCH", "/api/admin/connections/c0", `{"auth_mode":"header_key"}`, withToken...)
	if wantStatus(t, r, 200, ""); r.json(t)["auth_header_name"] != "X-API-Key" {
		t.Errorf("bearer switched to header_key = %s", r.Body)
	}
}
