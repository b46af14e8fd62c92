package httpsig

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"github.com/dunglas/httpsfv"
)

// message is the view of one HTTP message that component values are
// derived from (RFC 9421 §2).
type message struct {
	header  http.Header
	trailer http.Header

	response bool
	status   int

	// Request parts. target is the request-target exactly as on the wire
	// (origin-form "/p?q", asterisk-form "*", or absolute-form); pathQuery
	// is its path-and-query part ("" for "*").
	method    string
	scheme    string
	authority string
	target    string
	pathQuery string
	// contentLength is Request.ContentLength of a client request: net/http
	// writes the Content-Length field from it when sending.
	contentLength int64

	req *message // the related request, for ;req
}

// requestMessage builds the view of r. A request with RequestURI set was
// received by a server: its target URI is origin (scheme and authority) plus
// the path and query of the request-target exactly as received. Otherwise r
// is a client request and r.URL is used: its scheme, r.Host (or r.URL.Host)
// and r.URL.RequestURI(), which is what net/http writes on the request line.
func requestMessage(r *http.Request, origin func(*http.Request) (string, string)) *message {
	m := &message{header: r.Header, trailer: r.Trailer, method: r.Method, contentLength: -1}
	if r.RequestURI == "" {
		if m.method == "" {
			m.method = http.MethodGet
		}
		m.scheme = r.URL.Scheme
		m.authority = r.Host
		if m.authority == "" {
			m.authority = r.URL.Host
		}
		m.target = r.URL.RequestURI()
		m.pathQuery = m.target
		m.contentLength = r.ContentLength
		return m
	}
	if origin != nil {
		m.scheme, m.authority = origin(r)
	} else {
		m.scheme, m.authority = "http", r.Host
		if r.TLS != nil {
			m.scheme = "https"
		}
	}
	m.target = r.RequestURI
	switch {
	case strings.HasPrefix(m.target, "/"):
		m.pathQuery = m.target
	case m.target == "*":
	default:
		// absolute-form (RFC 9112 §3.2.2): only its path and query count.
		// Its scheme and authority are the client's word, and taking them
		// would let a signature made for https://other.example verify over
		// this plain-HTTP connection; the origin above stays bound to the
		// connection.
		if _, rest, ok := strings.Cut(m.target, "://"); ok {
			i := strings.IndexAny(rest, "/?")
			if i < 0 {
				i = len(rest)
			}
			m.pathQuery = rest[i:]
		}
	}
	return m
}

func responseMessage(resp *http.Response, req *message) *message {
	return &message{header: resp.Header, trailer: resp.Trailer, response: true, status: resp.StatusCode, req: req, contentLength: -1}
}

func (m *message) path() string {
	p, _, _ := strings.Cut(m.pathQuery, "?")
	return p
}

func (m *message) rawQuery() (string, bool) {
	_, q, ok := strings.Cut(m.pathQuery, "?")
	return q, ok
}

// appendValue appends the component value of c (RFC 9421 §2.1, §2.2).
func (m *message) appendValue(b []byte, c *Component, lowerMethod bool) ([]byte, error) {
	if c.Req {
		if m.req == nil {
			return b, newError(ErrComponentsInvalid, "component with req but no related request")
		}
		m = m.req
	}
	if !isDerived(c.Name) {
		return m.appendField(b, c)
	}
	if m.response != (c.Name == compStatus) {
		return b, newError(ErrComponentsInvalid, c.Name+" is not defined for this message")
	}
	switch c.Name {
	case compMethod:
		if lowerMethod {
			return appendLower(b, m.method), nil
		}
		return append(b, m.method...), nil
	case compTargetURI:
		b = append(b, m.scheme...)
		b = append(b, "://"...)
		b = append(b, m.authority...)
		return append(b, m.pathQuery...), nil
	case compAuthority:
		return appendAuthority(b, m.scheme, m.authority), nil
	case compScheme:
		return appendLower(b, m.scheme), nil
	case compRequestTarget:
		return append(b, m.target...), nil
	case compPath:
		p := m.path()
		if p == "" {
			p = "/"
		}
		return append(b, p...), nil
	case compQuery:
		q, _ := m.rawQuery()
		b = append(b, '?')
		return append(b, q...), nil
	case compQueryParam:
		q, _ := m.rawQuery()
		return appendQueryParam(b, q, c.QueryName)
	case compStatus:
		if m.status < 100 || m.status > 999 {
			return b, newError(ErrComponentsInvalid, "status code is not three digits")
		}
		return strconv.AppendInt(b, int64(m.status), 10), nil
	}
	return b, newError(ErrComponentsInvalid, "unknown derived component "+quoteForError(c.Name))
}

func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// appendAuthority appends the authority normalised per RFC 9110 §4.2.3 as
// RFC 9421 §2.2.3 requires: lower-cased, default port for the scheme removed.
func appendAuthority(b []byte, scheme, authority string) []byte {
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.Contains(authority[i:], "]") {
		port := authority[i+1:]
		if port == "" ||
			(port == "80" && strings.EqualFold(scheme, "http")) ||
			(port == "443" && strings.EqualFold(scheme, "https")) {
			authority = authority[:i]
		}
	}
	return appendLower(b, authority)
}

// fieldLines returns the field lines of name (a lower-case field name) from
// h without allocating in the common case of a canonical key.
func fieldLines(h http.Header, name string) []string {
	var buf [64]byte
	if len(name) <= len(buf) {
		upper := true
		for i := 0; i < len(name); i++ {
			c := name[i]
			if upper && 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			buf[i] = c
			upper = c == '-'
		}
		if v, ok := h[string(buf[:len(name)])]; ok {
			return v
		}
	}
	// Header maps filled by hand may hold non-canonical keys.
	var lines []string
	for k, v := range h {
		if strings.EqualFold(k, name) {
			lines = append(lines, v...)
		}
	}
	return lines
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// appendField appends the value of an HTTP field component (RFC 9421 §2.1).
func (m *message) appendField(b []byte, c *Component) ([]byte, error) {
	src := m.header
	if c.TR {
		src = m.trailer
	}
	lines := fieldLines(src, c.Name)
	if lines == nil && !c.TR {
		lines = m.implicitField(c.Name)
	}
	if lines == nil {
		return b, newError(ErrComponentsInvalid, "covered field "+quoteForError(c.Name)+" is absent")
	}
	switch {
	case c.Key != "":
		d, err := httpsfv.UnmarshalDictionary(lines)
		if err != nil {
			return b, wrapError(ErrComponentsInvalid, "field "+c.Name+" is not a dictionary", err)
		}
		member, ok := d.Get(c.Key)
		if !ok {
			return b, newError(ErrComponentsInvalid, "dictionary member "+quoteForError(c.Key)+" of "+c.Name+" is absent")
		}
		return appendMember(b, member)
	case c.SF:
		return appendStructured(b, c.Name, lines)
	case c.BS:
		for i, l := range lines {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = append(b, ':')
			b = base64.StdEncoding.AppendEncode(b, []byte(trimOWS(l)))
			b = append(b, ':')
		}
		return b, nil
	}
	for i, l := range lines {
		if i > 0 {
			b = append(b, ", "...)
		}
		l = trimOWS(l)
		if strings.IndexByte(l, '\n') >= 0 || strings.IndexByte(l, '\r') >= 0 {
			return b, newError(ErrComponentsInvalid, "field "+c.Name+" contains a line break")
		}
		b = append(b, l...)
	}
	return b, nil
}

// implicitField supplies fields that net/http keeps out of the header map:
// Host (in Request.Host) and, for a client request, Content-Length (in
// Request.ContentLength, written by the transport).
func (m *message) implicitField(name string) []string {
	switch {
	case name == "host" && !m.response && m.authority != "":
		return []string{m.authority}
	case name == "content-length" && m.contentLength > 0:
		return []string{strconv.FormatInt(m.contentLength, 10)}
	}
	return nil
}
