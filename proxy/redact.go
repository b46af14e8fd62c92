package proxy

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// redactedMark replaces every occurrence of a credential form in what the
// upstream returns.
const redactedMark = "[redacted]"

// redactResponse applies the connection's response rules to an upstream
// answer before any of it reaches the agent: Set-Cookie is dropped unless
// the connection allows upstream cookies, then every credential form
// (credvault.Resolved.Redactions) is removed from the headers, trailers and,
// when it carries no Content-Encoding, the body.
func redactResponse(resp *http.Response, forms []string, allowCookies bool) {
	cleanHeader(resp.Header, forms, allowCookies)
	if len(forms) == 0 {
		return
	}
	// A protocol switch hands the connection over; its bytes are not HTTP
	// body and cannot be rewritten.
	if resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil && resp.Body != http.NoBody &&
		!encoded(resp.Header) {
		resp.Body = newRedactingBody(resp.Body, forms)
		// The length changes with every replacement, and the headers leave
		// before the body is read, so the body goes out chunked.
		// resp.ContentLength stays: ReverseProxy reads it only to flush
		// every write of a body of unknown length, and a body whose length
		// was known is no stream (flushing it write by write cost about 10 %
		// of a 16 KiB response's CPU).
		resp.Header.Del("Content-Length")
	}
	if len(resp.Trailer) > 0 {
		resp.Body = &trailerRedactor{ReadCloser: resp.Body, trailer: resp.Trailer, forms: forms}
	}
}

// encoded reports whether a body is compressed or otherwise encoded, so that
// a credential in it cannot be found byte for byte.
func encoded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}

// cleanHeader drops Set-Cookie unless allowCookies and redacts forms.
func cleanHeader(h http.Header, forms []string, allowCookies bool) {
	if !allowCookies {
		h.Del("Set-Cookie")
		h.Del("Set-Cookie2")
	}
	if len(forms) > 0 {
		redactHeader(h, forms)
	}
}

// redactHeader removes credential forms from h in place: a header whose
// name contains one is dropped (a name cannot hold the mark), and each form
// inside a value becomes [redacted], Location included, so a redirect keeps
// working: followed through the gateway, its credential parameter is
// replaced by the real one again.
func redactHeader(h http.Header, forms []string) {
	var m *matcher
	for name, values := range h {
		if nameContains(name, forms) {
			delete(h, name)
			continue
		}
		for i, v := range values {
			if !containsAny(v, forms) {
				continue
			}
			if m == nil {
				m = newMatcher(forms)
			}
			out, _, _ := m.scan(nil, []byte(v), true)
			values[i] = string(out)
		}
	}
}

func containsAny(s string, forms []string) bool {
	for _, f := range forms {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

// nameContains matches case-insensitively: header names are canonicalised,
// which changes the case of what the upstream sent.
func nameContains(name string, forms []string) bool {
	for _, f := range forms {
		for i := 0; i+len(f) <= len(name); i++ {
			if strings.EqualFold(name[i:i+len(f)], f) {
				return true
			}
		}
	}
	return false
}

// trailerRedactor redacts the trailers, which the transport fills in once
// the body has been read and ReverseProxy copies after closing it.
type trailerRedactor struct {
	io.ReadCloser
	trailer http.Header
	forms   []string
}

func (t *trailerRedactor) Close() error {
	err := t.ReadCloser.Close()
	redactHeader(t.trailer, t.forms)
	return err
}

// matcher finds credential forms in bytes with the semantics of
// strings.NewReplacer given the forms longest first: the leftmost match
// wins, and of the forms matching there the longest.
type matcher struct {
	patterns [][]byte // longest first
	first    [256]bool
	maxLen   int
	next     []int // scan's cache: next match of each pattern, -1 none
}

func newMatcher(forms []string) *matcher {
	m := &matcher{patterns: make([][]byte, 0, len(forms)), next: make([]int, len(forms))}
	size := 0
	for _, f := range forms {
		size += len(f)
	}
	all := make([]byte, 0, size) // one allocation for every pattern
	for _, f := range forms {
		if f == "" {
			continue
		}
		all = append(all, f...)
		m.patterns = append(m.patterns, all[len(all)-len(f):len(all):len(all)])
		m.first[f[0]] = true
		m.maxLen = max(m.maxLen, len(f))
	}
	return m
}

// scan decides the bytes of in: it returns them with every match replaced
// by the mark, and keep, the start of the undecided tail in[keep:], which
// might still become a match once more bytes follow. The tail is empty when
// final, and otherwise shorter than the longest pattern. Unless replaced,
// out aliases in; else it is dst[:0] with the output appended.
func (m *matcher) scan(dst, in []byte, final bool) (out []byte, keep int, replaced bool) {
	for j := range m.next {
		m.next[j] = -2 // not searched yet
	}
	i := 0
	for {
		p, length := m.leftmost(in, i)
		if p < 0 {
			break
		}
		// Near the end a match can still lose to a longer pattern, or to
		// one starting earlier, that the next bytes would complete.
		if !final && p > len(in)-m.maxLen && m.partial(in, i) <= p {
			break
		}
		if !replaced {
			replaced = true
			dst = dst[:0]
		}
		dst = append(dst, in[i:p]...)
		dst = append(dst, redactedMark...)
		i = p + length
	}
	keep = len(in)
	if !final {
		keep = m.partial(in, i)
	}
	if !replaced {
		return in[:keep], keep, false
	}
	return append(dst, in[i:keep]...), keep, true
}

// leftmost returns the position and length of the leftmost, longest match
// in in[from:], or -1.
func (m *matcher) leftmost(in []byte, from int) (pos, length int) {
	pos = -1
	for j, pat := range m.patterns {
		n := m.next[j]
		if n == -1 {
			continue
		}
		if n < from {
			k := bytes.Index(in[from:], pat)
			if k < 0 {
				m.next[j] = -1
				continue
			}
			n = from + k
			m.next[j] = n
		}
		if pos < 0 || n < pos { // patterns are longest first: a tie keeps the longer
			pos, length = n, len(pat)
		}
	}
	return pos, length
}

// partial returns the first position q ≥ from whose suffix in[q:] is a
// proper prefix of a pattern, or len(in).
func (m *matcher) partial(in []byte, from int) int {
	for q := max(from, len(in)-m.maxLen+1); q < len(in); q++ {
		if !m.first[in[q]] {
			continue
		}
		tail := in[q:]
		for _, pat := range m.patterns {
			if len(pat) > len(tail) && bytes.HasPrefix(pat, tail) {
				return q
			}
		}
	}
	return len(in)
}

// readBufs recycles the buffers in which a redacting body joins a held
// tail to the next read.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// redactingBody streams an upstream body with every credential form
// replaced. It holds back only bytes that could still begin a match (never
// more than the longest form less one), so event streams, whose events end
// in a newline that no form contains, are passed on event by event. The
// common read, with nothing held back and nothing found, is decided in the
// caller's buffer without a copy.
type redactingBody struct {
	src  io.ReadCloser
	m    *matcher
	held []byte  // undecided tail of the last read
	buf  *[]byte // pooled: the held tail followed by a read
	dst  []byte  // output with replacements
	out  []byte  // decided output not yet returned, in buf or dst
	err  error   // the source's error, returned once out is drained
	done bool    // closed
}

// RedactBody returns src with every form (a credential's, longest first,
// as credvault.AccessToken.Redactions lists them) replaced by
// "[redacted]" as it is read; the gateway puts it under an OAuth MCP
// connection's answers. An encoded body is returned as it is.
func RedactBody(resp *http.Response, forms []string) {
	if len(forms) == 0 || resp.Body == nil || resp.Body == http.NoBody || encoded(resp.Header) {
		return
	}
	resp.Body = newRedactingBody(resp.Body, forms)
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
}

func newRedactingBody(src io.ReadCloser, forms []string) *redactingBody {
	return &redactingBody{src: src, m: newMatcher(forms)}
}

func (b *redactingBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		switch {
		case b.done:
			return 0, http.ErrBodyReadAfterClose
		case b.err != nil:
			return 0, b.err
		case len(p) == 0:
			return 0, nil
		}
		inPlace := len(b.held) == 0
		chunk := p
		if !inPlace {
			if b.buf == nil {
				b.buf = readBufs.Get().(*[]byte)
			}
			chunk = append((*b.buf)[:0], b.held...)
			chunk = slices.Grow(chunk, len(p))[:len(chunk)+len(p)]
			*b.buf = chunk
		}
		start := len(chunk) - len(p)
		n, err := b.src.Read(chunk[start:])
		chunk = chunk[:start+n]
		// On an error other than EOF the held tail is dropped: it may be
		// the start of the credential.
		b.err = err
		out, keep, replaced := b.m.scan(b.dst[:0], chunk, err == io.EOF)
		b.held = append(b.held[:0], chunk[keep:]...)
		if replaced {
			b.dst = out
		} else if inPlace {
			if keep > 0 {
				return keep, nil
			}
			continue
		}
		b.out = out
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

func (b *redactingBody) Close() error {
	if !b.done {
		b.done = true
		if b.buf != nil && cap(*b.buf) <= 128<<10 { // one grown for a huge credential is let go
			*b.buf = (*b.buf)[:0]
			readBufs.Put(b.buf)
		}
		b.buf, b.dst, b.out, b.held = nil, nil, nil, nil
	}
	return b.src.Close()
}

// informational redacts the headers of 1xx answers (103 Early Hints),
// which ReverseProxy copies to the client as they arrive, before and
// outside ModifyResponse.
type informational struct {
	http.ResponseWriter
	t *forwardTarget
}

func (w informational) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		cleanHeader(w.Header(), w.t.redact, w.t.conn.AllowUpstreamCookies)
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (w informational) Unwrap() http.ResponseWriter { return w.ResponseWriter }
