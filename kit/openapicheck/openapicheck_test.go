package openapicheck

import (
	"slices"
	"strings"
	"testing"
)

func TestParseFindsEveryProblem(t *testing.T) {
	doc := `{"openapi":"3.0.3","paths":{
		"/a/{id}":{"get":{"operationId":"a","responses":{"200":{"$ref":"#/components/responses/Missing"}}}},
		"/b":{"post":{"operationId":"a","responses":{}}}},
		"components":{}}`
	_, err := Parse([]byte(doc))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`"openapi" is "3.0.3"`, `$ref "#/components/responses/Missing" does not resolve`,
		`path parameter "id" is not declared`, `operationId "a" also names`, "POST /b: no responses"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// A repeated key is found wherever it is, and named by its JSON Pointer:
// encoding/json would keep the last one, hiding the first.
func TestParseFindsDuplicateKeys(t *testing.T) {
	doc := `{"openapi":"3.1.0","paths":{
		"/a/{id}":{"parameters":[{"name":"id","in":"path","required":true},{"name":"x","in":"query","in":"header"}],
			"get":{"operationId":"a","description":"one","responses":{"200":{"description":"ok"}},"description":"two"}},
		"/b":{"get":{"operationId":"b","responses":{"200":{"description":"ok"}}}},
		"/b":{"get":{"operationId":"c","responses":{"200":{"description":"ok"}}}}}}`
	_, err := Parse([]byte(doc))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`/paths/~1a~1{id}/get/description: key "description" appears twice`,
		`/paths/~1a~1{id}/parameters/1/in: key "in" appears twice`, `/paths/~1b: key "/b" appears twice`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if n := strings.Count(err.Error(), "appears twice"); n != 3 {
		t.Errorf("%d repeated keys reported, want 3: %v", n, err)
	}
}

func TestParseValid(t *testing.T) {
	doc := `{"openapi":"3.1.0","paths":{
		"/a/{id}":{"parameters":[{"$ref":"#/components/parameters/id"}],
			"get":{"operationId":"a","responses":{"200":{"description":"ok"}}},
			"delete":{"operationId":"b","responses":{"204":{"description":"gone"}}}}},
		"components":{"parameters":{"id":{"name":"id","in":"path","required":true,"schema":{"type":"string"}}}}}`
	d, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Operations(); !slices.Equal(got, []string{"DELETE /a/{id}", "GET /a/{id}"}) {
		t.Fatalf("operations %v", got)
	}
}

func TestRoute(t *testing.T) {
	for pattern, want := range map[string]string{
		"GET /{$}":              "GET /",
		"GET /v1/x/{id}":        "GET /v1/x/{id}",
		"POST /files/{path...}": "POST /files/{path}",
		"GET /v1/x/{$}":         "GET /v1/x/",
	} {
		if got, err := Route(pattern); err != nil || got != want {
			t.Errorf("Route(%q) = %q, %v; want %q", pattern, got, err, want)
		}
	}
	for _, bad := range []string{"/v1/x", "GET example.com/x", "GET /v1/"} {
		if _, err := Route(bad); err == nil {
			t.Errorf("Route(%q) passed", bad)
		}
	}
}

func TestDiff(t *testing.T) {
	in, out := Diff([]string{"GET /a", "GET /b"}, []string{"GET /b", "GET /c"})
	if !slices.Equal(in, []string{"GET /a"}) || !slices.Equal(out, []string{"GET /c"}) {
		t.Fatalf("Diff = %v, %v", in, out)
	}
}
