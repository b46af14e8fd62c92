package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/idnhq/idn/identity"
)

// headerFlags collects repeated -H values.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

// requestFlags are the flags sign and curl share.
type requestFlags struct {
	method, data, subject, namespace string
	headers                          headerFlags
}

func (f *requestFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.method, "X", "", "HTTP method")
	fs.Var(&f.headers, "H", "header 'Name: value' (repeatable)")
	fs.StringVar(&f.data, "d", "", "body, @file or @-")
	fs.StringVar(&f.subject, "subject", "", "idn-subject")
	fs.StringVar(&f.namespace, "namespace", "", "identity namespace")
}

// signedRequest builds the request the flags describe and signs it.
func (f *requestFlags) signedRequest(pos []string, e env) (*http.Request, error) {
	if len(pos) != 1 {
		return nil, fmt.Errorf("%w: give exactly one URL", errUsage)
	}
	u, err := url.Parse(pos[0])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: %q is not an absolute http(s) URL", errUsage, pos[0])
	}
	body, err := f.body(e)
	if err != nil {
		return nil, err
	}
	method := f.method
	if method == "" {
		method = http.MethodGet
		if body != nil {
			method = http.MethodPost
		}
	}
	if !validToken(method) {
		return nil, fmt.Errorf("%w: bad method %q", errUsage, method)
	}
	req, err := http.NewRequest(method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || !validToken(name) || strings.ContainsAny(value, "\r\n\x00") {
			return nil, fmt.Errorf("%w: malformed -H %q: want 'Name: value'", errUsage, h)
		}
		if strings.EqualFold(name, "Host") {
			req.Host = value
			continue
		}
		req.Header.Add(name, value)
	}
	id, _, err := loadIdentity(e, f.namespace)
	if err != nil {
		return nil, err
	}
	if err := id.Sign(req, identity.SignOptions{Subject: f.subject}); err != nil {
		return nil, err
	}
	return req, nil
}

func (f *requestFlags) body(e env) ([]byte, error) {
	switch {
	case f.data == "":
		return nil, nil
	case f.data == "@-":
		b, err := io.ReadAll(e.stdin)
		if err != nil {
			return nil, fmt.Errorf("read stdin: %v", err)
		}
		return b, nil
	case strings.HasPrefix(f.data, "@"):
		b, err := os.ReadFile(f.data[1:])
		if err != nil {
			return nil, fmt.Errorf("read body file: %v", err)
		}
		return b, nil
	}
	return []byte(f.data), nil
}

// signingHeaders are printed by sign, in this order.
var signingHeaders = []string{
	"Content-Digest", "Idn-Namespace", "Idn-Subject", "Idn-Agent-Key", "Idn-Agent-Cert", "Signature-Input", "Signature",
}

func cmdSign(args []string, e env) error {
	var f requestFlags
	fs := newFlagSet("sign")
	f.register(fs)
	asJSON := fs.Bool("json", false, "print the headers as one JSON object (lower-case names)")
	pos, err := parseInterleaved(fs, args, e)
	if err != nil {
		return err
	}
	req, err := f.signedRequest(pos, e)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make(map[string]string, len(signingHeaders))
		for _, name := range signingHeaders {
			if v := req.Header.Get(name); v != "" {
				out[strings.ToLower(name)] = v
			}
		}
		return writeJSON(e, out)
	}
	for _, name := range signingHeaders {
		if v := req.Header.Get(name); v != "" {
			fmt.Fprintf(e.stdout, "%s: %s\n", strings.ToLower(name), v)
		}
	}
	return nil
}

func cmdCurl(args []string, e env) (int, error) {
	var f requestFlags
	fs := newFlagSet("curl")
	f.register(fs)
	include := fs.Bool("i", false, "print status line and headers")
	fail := fs.Bool("f", false, "exit 22 on HTTP status >= 400")
	asJSON := fs.Bool("json", false, `print one JSON object {"status","headers","body"} (body as text)`)
	pos, err := parseInterleaved(fs, args, e)
	if err != nil {
		return 0, err
	}
	req, err := f.signedRequest(pos, e)
	if err != nil {
		return 0, err
	}
	client := &http.Client{
		Timeout:       2 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %v", req.Method, redactedURL(req.URL), unwrapURLError(err))
	}
	defer resp.Body.Close()
	if *asJSON {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, fmt.Errorf("read response: %v", err)
		}
		err = writeJSON(e, struct {
			Status  int                 `json:"status"`
			Headers map[string][]string `json:"headers"`
			Body    string              `json:"body"`
		}{resp.StatusCode, resp.Header, string(body)})
		if err != nil {
			return 0, err
		}
		if *fail && resp.StatusCode >= 400 {
			return 22, nil
		}
		return 0, nil
	}
	if *include {
		fmt.Fprintf(e.stdout, "%s %s\n", resp.Proto, resp.Status)
		names := make([]string, 0, len(resp.Header))
		for k := range resp.Header {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			for _, v := range resp.Header[k] {
				fmt.Fprintf(e.stdout, "%s: %s\n", k, v)
			}
		}
		fmt.Fprintln(e.stdout)
	}
	if _, err := io.Copy(e.stdout, resp.Body); err != nil {
		return 0, fmt.Errorf("read response: %v", err)
	}
	if *fail && resp.StatusCode >= 400 {
		return 22, nil
	}
	return 0, nil
}

// redactedURL drops the query, which may carry secrets, from error messages.
func redactedURL(u *url.URL) string {
	c := *u
	c.RawQuery, c.User = "", nil
	return c.String()
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// validToken reports whether s is an RFC 9110 token (method, field name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
