package httpsig

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func serverRequest(t *testing.T, raw string) *http.Request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(strings.ReplaceAll(raw, "\n", "\r\n") + "\r\n\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	r.TLS = &tls.ConnectionState{} // the RFC examples use https
	return r
}

func componentValue(m *message, c Component) (string, error) {
	b, err := m.appendValue(nil, &c, false)
	return string(b), err
}

// TestComponentValues follows the examples of RFC 9421 §2.1 and §2.2.
func TestComponentValues(t *testing.T) {
	post := serverRequest(t, "POST /path?param=value HTTP/1.1\nHost: www.example.com")
	fields := serverRequest(t, strings.Join([]string{
		"GET /parameters?var=this%20is%20a%20big%0Amultiline%20value&bar=with+plus+whitespace&fa%C3%A7ade%22%3A%20=something&dup=1&dup=2&bad=%FF%E2%82&empty= HTTP/1.1",
		"Host: Example.COM:443",
		"X-OWS-Header:   Leading and trailing whitespace.   ",
		"X-Obs-Fold-Header: Obsolete",
		"    line folding.",
		"Cache-Control: max-age=60",
		"Cache-Control:    must-revalidate",
		"Example-Dict:  a=1,    b=2;x=1;y=2,   c=(a   b   c)",
		"Example-Header: value, with, lots",
		"Example-Header: of, commas",
		"X-Empty-Header: ",
		"Content-Digest: sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:,   unknown=?1",
		"Priority: u=1,   i",
	}, "\n"))
	fields.Trailer = http.Header{"Expires": {"Wed, 9 Nov 2022 07:28:00 GMT"}}

	noQuery := serverRequest(t, "GET /path HTTP/1.1\nHost: www.example.com")
	emptyPath := requestMessage(must(http.NewRequest("GET", "http://Example.com:80", nil)), nil)
	star := serverRequest(t, "OPTIONS * HTTP/1.1\nHost: www.example.com")
	absolute := serverRequest(t, "GET http://www.example.com:8080/a?b HTTP/1.1\nHost: ignored.example")

	for _, tc := range []struct {
		name string
		m    *message
		c    Component
		want string
		err  error
	}{
		{name: "method", m: requestMessage(post, nil), c: Component{Name: "@method"}, want: "POST"},
		{name: "target-uri", m: requestMessage(post, nil), c: Component{Name: "@target-uri"}, want: "https://www.example.com/path?param=value"},
		{name: "authority", m: requestMessage(post, nil), c: Component{Name: "@authority"}, want: "www.example.com"},
		{name: "authority lower-cased, default port removed", m: requestMessage(fields, nil), c: Component{Name: "@authority"}, want: "example.com"},
		{name: "authority of client URL", m: emptyPath, c: Component{Name: "@authority"}, want: "example.com"},
		{name: "authority keeps other ports", m: requestMessage(absolute, nil), c: Component{Name: "@authority"}, want: "www.example.com:8080"},
		{name: "scheme", m: requestMessage(post, nil), c: Component{Name: "@scheme"}, want: "https"},
		{name: "request-target", m: requestMessage(post, nil), c: Component{Name: "@request-target"}, want: "/path?param=value"},
		{name: "request-target asterisk", m: requestMessage(star, nil), c: Component{Name: "@request-target"}, want: "*"},
		{name: "request-target absolute-form", m: requestMessage(absolute, nil), c: Component{Name: "@request-target"}, want: "http://www.example.com:8080/a?b"},
		{name: "target-uri absolute-form keeps the connection's scheme", m: requestMessage(absolute, nil), c: Component{Name: "@target-uri"}, want: "https://www.example.com:8080/a?b"},
		{name: "target-uri absolute-form keeps the origin's authority", m: requestMessage(absolute, func(*http.Request) (string, string) { return "http", "gw.example" }), c: Component{Name: "@target-uri"}, want: "http://gw.example/a?b"},
		{name: "path", m: requestMessage(post, nil), c: Component{Name: "@path"}, want: "/path"},
		{name: "empty path is /", m: emptyPath, c: Component{Name: "@path"}, want: "/"},
		{name: "query", m: requestMessage(post, nil), c: Component{Name: "@query"}, want: "?param=value"},
		{name: "absent query is ?", m: requestMessage(noQuery, nil), c: Component{Name: "@query"}, want: "?"},
		{name: "query-param re-encoded", m: requestMessage(fields, nil), c: Component{Name: "@query-param", QueryName: "var"}, want: "this%20is%20a%20big%0Amultiline%20value"},
		{name: "query-param plus is space", m: requestMessage(fields, nil), c: Component{Name: "@query-param", QueryName: "bar"}, want: "with%20plus%20whitespace"},
		{name: "query-param encoded name", m: requestMessage(fields, nil), c: Component{Name: "@query-param", QueryName: "fa%C3%A7ade%22%3A%20"}, want: "something"},
		{name: "query-param empty value", m: requestMessage(fields, nil), c: Component{Name: "@query-param", QueryName: "empty"}, want: ""},
		{name: "query-param invalid UTF-8 becomes U+FFFD", m: requestMessage(fields, nil), c: Component{Name: "@query-param", QueryName: "bad"}, want: "%EF%BF%BD%EF%BF%BD"},
		{name: "query-param repeated", m: requestMessage(fields, nil), c: Component{Name: "@query-param", QueryName: "dup"}, err: ErrComponentsInvalid},
		{name: "query-param absent", m: requestMessage(fields, nil), c: Component{Name: "@query-param", QueryName: "nope"}, err: ErrComponentsInvalid},
		{name: "status in request", m: requestMessage(post, nil), c: Component{Name: "@status"}, err: ErrComponentsInvalid},
		{name: "field whitespace trimmed", m: requestMessage(fields, nil), c: Component{Name: "x-ows-header"}, want: "Leading and trailing whitespace."},
		{name: "obsolete line folding", m: requestMessage(fields, nil), c: Component{Name: "x-obs-fold-header"}, want: "Obsolete line folding."},
		{name: "field lines combined", m: requestMessage(fields, nil), c: Component{Name: "cache-control"}, want: "max-age=60, must-revalidate"},
		{name: "empty field", m: requestMessage(fields, nil), c: Component{Name: "x-empty-header"}, want: ""},
		{name: "host field", m: requestMessage(post, nil), c: Component{Name: "host"}, want: "www.example.com"},
		{name: "absent field", m: requestMessage(post, nil), c: Component{Name: "x-absent"}, err: ErrComponentsInvalid},
		{name: "dictionary member item", m: requestMessage(fields, nil), c: Component{Name: "example-dict", Key: "a"}, want: "1"},
		{name: "dictionary member with parameters", m: requestMessage(fields, nil), c: Component{Name: "example-dict", Key: "b"}, want: "2;x=1;y=2"},
		{name: "dictionary member inner list", m: requestMessage(fields, nil), c: Component{Name: "example-dict", Key: "c"}, want: "(a b c)"},
		{name: "dictionary member absent", m: requestMessage(fields, nil), c: Component{Name: "example-dict", Key: "d"}, err: ErrComponentsInvalid},
		{name: "bare dictionary member", m: requestMessage(fields, nil), c: Component{Name: "content-digest", Key: "unknown"}, want: "?1"},
		{name: "sf dictionary", m: requestMessage(fields, nil), c: Component{Name: "content-digest", SF: true}, want: "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:, unknown"},
		{name: "sf dictionary with bare keys", m: requestMessage(fields, nil), c: Component{Name: "priority", SF: true}, want: "u=1, i"},
		{name: "sf on a field of unknown type", m: requestMessage(fields, nil), c: Component{Name: "example-dict", SF: true}, err: ErrComponentsInvalid},
		{name: "bs per field line", m: requestMessage(fields, nil), c: Component{Name: "example-header", BS: true}, want: ":dmFsdWUsIHdpdGgsIGxvdHM=:, :b2YsIGNvbW1hcw==:"},
		{name: "plain combination of the same field", m: requestMessage(fields, nil), c: Component{Name: "example-header"}, want: "value, with, lots, of, commas"},
		{name: "trailer", m: requestMessage(fields, nil), c: Component{Name: "expires", TR: true}, want: "Wed, 9 Nov 2022 07:28:00 GMT"},
		{name: "trailer absent from header section", m: requestMessage(fields, nil), c: Component{Name: "expires"}, err: ErrComponentsInvalid},
		{name: "status", m: responseMessage(&http.Response{StatusCode: 404}, nil), c: Component{Name: "@status"}, want: "404"},
		{name: "request component in response needs req", m: responseMessage(&http.Response{StatusCode: 200}, requestMessage(post, nil)), c: Component{Name: "@method", Req: true}, want: "POST"},
		{name: "req without related request", m: responseMessage(&http.Response{StatusCode: 200}, nil), c: Component{Name: "@method", Req: true}, err: ErrComponentsInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := componentValue(tc.m, tc.c)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("value = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestComponentIdentifierRoundTrip(t *testing.T) {
	for _, c := range []Component{
		{Name: "@query-param", QueryName: `a"b\c`},
		{Name: "example-dict", Key: "a", SF: true},
		{Name: "example-header", BS: true, TR: true, Req: true},
	} {
		id, err := c.appendIdentifier(nil)
		if err != nil {
			t.Fatal(err)
		}
		list := "sig=(" + string(id) + ")"
		in := (&Verifier{Label: "sig"})
		h := http.Header{"Signature-Input": {list}, "Signature": {"sig=:AA==:"}}
		sel, err := in.selectSignature(h)
		if err != nil {
			t.Fatal(err)
		}
		got, err := componentFromItem(sel.list.Items[0])
		if err != nil || got != c {
			t.Fatalf("%s parsed as %+v, %v", id, got, err)
		}
		again, _ := appendItem(nil, sel.list.Items[0])
		if string(again) != string(id) {
			t.Fatalf("re-serialised %s as %s", id, again)
		}
	}
}

// FuzzQueryParamEncoding checks that the @query-param re-encoding is
// idempotent and yields only the characters the form serializer keeps.
func FuzzQueryParamEncoding(f *testing.F) {
	for _, s := range []string{"this%20is%20a%20big%0Amultiline%20value", "with+plus+whitespace", "fa%C3%A7ade%22%3A%20", "%FF%E2%82", "%", "%zz", "a*b-c._d~", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := formEncode(formDecode(s))
		if twice := formEncode(formDecode(once)); twice != once {
			t.Fatalf("%q -> %q -> %q", s, once, twice)
		}
		for i := 0; i < len(once); i++ {
			if c := once[i]; !formSafe(c) && c != '%' && !isHex(c) {
				t.Fatalf("%q encodes to %q", s, once)
			}
		}
	})
}

// TestDecodeUTF8 follows the WHATWG Encoding standard: each maximal
// subpart of an ill-formed sequence becomes one U+FFFD.
func TestDecodeUTF8(t *testing.T) {
	const r = "\uFFFD"
	for in, want := range map[string]string{
		"plain":            "plain",
		"\xE2\x82\xAC":     "€",
		"a\xFFb":           "a" + r + "b",
		"\xC0\xAF":         r + r,
		"\xE0\x80\x80":     r + r + r,
		"\xED\xA0\x80":     r + r + r,
		"\xF0\x9F\x98A":    r + "A",
		"\xF4\x90\x80\x80": r + r + r + r,
		"\xF0\x9F\x98\x80": "😀",
		"\xE2\x82":         r,
	} {
		if got := decodeUTF8([]byte(in)); got != want {
			t.Errorf("decodeUTF8(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStructuredFieldTypes(t *testing.T) {
	r := serverRequest(t, strings.Join([]string{
		"GET / HTTP/1.1",
		"Host: example.com",
		"Cache-Status: ExampleCache; hit,   OtherCache; fwd=uri-miss",
		"Client-Cert:   :AAEC:  ",
		"Priority: u=?",
		"Want-Content-Digest: sha-256=10, sha-512=3",
		"Want-Content-Digest: md5=0",
	}, "\n"))
	m := requestMessage(r, nil)
	for _, tc := range []struct {
		name, want string
		wantErr    bool
	}{
		{name: "cache-status", want: "ExampleCache;hit, OtherCache;fwd=uri-miss"},
		{name: "client-cert", want: ":AAEC:"},
		{name: "want-content-digest", want: "sha-256=10, sha-512=3, md5=0"},
		{name: "priority", wantErr: true},
	} {
		got, err := componentValue(m, Component{Name: tc.name, SF: true})
		if tc.wantErr {
			if !errors.Is(err, ErrComponentsInvalid) {
				t.Errorf("%s: err = %v", tc.name, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	err := wrapError(ErrIdentityInvalid, "key resolution failed", errors.New("unknown keyid"))
	if err.Error() != "httpsig: key resolution failed: unknown keyid" || !errors.Is(err, ErrIdentityInvalid) || kindOf(err) != ErrIdentityInvalid {
		t.Fatalf("%v / %v", err, kindOf(err))
	}
	if kindOf(errors.New("other")) != nil || kindOf(nil) != nil {
		t.Fatal("code for a foreign error")
	}
}
