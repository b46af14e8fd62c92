package openapicheck

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const responseDoc = `{"openapi":"3.1.0","paths":{
	"/openapi.json":{"get":{"operationId":"doc","responses":{"200":{"description":"ok","content":{"application/json":{}}}}}},
	"/items":{"get":{"operationId":"list","responses":{
		"200":{"description":"ok","content":{"application/json":{"schema":{"type":"array","items":{"$ref":"#/components/schemas/Item"}}}}},
		"303":{"description":"see other"},
		"4XX":{"description":"error","content":{"application/json":{"schema":{"$ref":"#/components/schemas/Error"}}}}}}},
	"/items/{id}":{"parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],
		"get":{"operationId":"one","responses":{"200":{"description":"ok","content":{
			"application/ld+json;profile=\"https://example.com/p\"":{"schema":{"$ref":"#/components/schemas/Item"}}}}}}},
	"/items/special":{"get":{"operationId":"special","responses":{"204":{"description":"none"}}}},
	"/files/{path}":{"parameters":[{"name":"path","in":"path","required":true,"schema":{"type":"string"}}],
		"get":{"operationId":"file","responses":{"default":{"description":"any","content":{"*/*":{}}}}}}},
	"components":{"schemas":{
		"Fields":{"type":"object","properties":{"name":{"type":"string"}}},
		"Item":{"allOf":[{"$ref":"#/components/schemas/Fields"},{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}],"unevaluatedProperties":false},
		"Error":{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}}}}`

func TestCheckResponse(t *testing.T) {
	doc, err := Parse([]byte(responseDoc))
	if err != nil {
		t.Fatal(err)
	}
	jsonType := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		want               string // "" means the response matches
	}{
		{"array of items", "GET", "/items", 200, jsonType, `[{"id":"a","name":"A"}]`, ""},
		{"null for an array", "GET", "/items", 200, jsonType, `null`, "want \"array\""},
		{"field neither part declares", "GET", "/items", 200, jsonType, `[{"id":"a","extra":1}]`, "unevaluatedProperties"},
		{"status range", "GET", "/items", 404, jsonType, `{"code":"NOT_FOUND"}`, ""},
		{"status not documented", "GET", "/items", 500, jsonType, `{}`, "status 500 is not documented"},
		{"body where none is documented", "GET", "/items", 303, http.Header{"Content-Type": {"text/html"}}, `<a>x</a>`, "says no content"},
		{"no body where none is documented", "GET", "/items", 303, http.Header{}, ``, ""},
		{"media type not documented", "GET", "/items", 200, http.Header{"Content-Type": {"text/plain"}}, `x`, "not documented"},
		{"media type with its profile", "GET", "/items/x", 200, http.Header{"Content-Type": {`application/ld+json; profile="https://example.com/p"`}}, `{"id":"x"}`, ""},
		{"literal segment wins", "GET", "/items/special", 204, http.Header{}, ``, ""},
		{"final parameter takes the rest", "GET", "/files/a/b/c", 200, http.Header{"Content-Type": {"image/png"}}, `png`, ""},
		{"undocumented path, error envelope", "GET", "/nope", 404, jsonType, `{"code":"NOT_FOUND"}`, ""},
		{"undocumented path, not the envelope", "GET", "/nope", 404, jsonType, `{"message":"no"}`, "code"},
		{"undocumented path, success", "GET", "/nope", 200, jsonType, `{}`, "no such operation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := doc.CheckResponse(tc.method, tc.path, tc.status, tc.header, []byte(tc.body))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected drift: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("passed; want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q lacks %q", err, tc.want)
			}
		})
	}
}

// Watch fails the test when a response drifts (fakeTB records the
// failure instead of failing this test).
func TestWatchReportsDrift(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(responseDoc))
	})
	mux.HandleFunc("GET /items", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("null"))
	})
	tb := &fakeTB{TB: t}
	ts := httptest.NewServer(Watch(tb, mux))
	res, err := ts.Client().Get(ts.URL + "/items")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	ts.Close()
	for _, f := range tb.cleanups {
		f()
	}
	if len(tb.errors) != 1 || !strings.Contains(tb.errors[0], "GET /items") {
		t.Fatalf("reported %q", tb.errors)
	}
}

// WatchClient holds the responses a client receives to the document the
// answering server serves.
func TestWatchClientReportsDrift(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(responseDoc))
	})
	mux.HandleFunc("GET /items", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`[{"id":"a"}]`))
	})
	mux.HandleFunc("GET /items/special", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("a body where the document promises none"))
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	tb := &fakeTB{TB: t}
	c := WatchClient(tb, nil)
	for _, path := range []string{"/items", "/items/special"} {
		res, err := c.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(res.Body); len(b) == 0 {
			t.Fatalf("%s: the caller lost the body", path)
		}
		res.Body.Close()
	}
	for _, f := range tb.cleanups {
		f()
	}
	if len(tb.errors) != 1 || !strings.Contains(tb.errors[0], "GET /items/special") {
		t.Fatalf("reported %q", tb.errors)
	}
}

type fakeTB struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(format string, a ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, a...))
}
