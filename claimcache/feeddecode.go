package claimcache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// pageReader reads a feed page's JSON as it arrives, for decodeFeedPage.
// It knows the page's shape, so it decodes a claim without reflection and
// with one allocation (the claim's strings share it); whatever else the page
// holds it checks as JSON and skips.
type pageReader struct {
	r   io.Reader
	buf []byte
	pos int
	err error  // of r, once it failed or ended
	str []byte // scratch for a string being read
}

// maxSkipDepth bounds the nesting of a value pageReader skips.
const maxSkipDepth = 64

var errSyntax = errors.New("not valid JSON")

// fill reads more of the page; it reports false at its end or on an error.
func (p *pageReader) fill() bool {
	if p.err != nil {
		return false
	}
	if p.pos > 0 {
		p.buf = p.buf[:copy(p.buf, p.buf[p.pos:])]
		p.pos = 0
	}
	if len(p.buf) == cap(p.buf) {
		p.buf = append(p.buf, 0)[:len(p.buf)]
	}
	n, err := p.r.Read(p.buf[len(p.buf):cap(p.buf)])
	p.buf = p.buf[:len(p.buf)+n]
	if err != nil {
		p.err = err
	}
	return n > 0 || err == nil
}

// fail returns the error that ended the page early, or errSyntax.
func (p *pageReader) fail() error {
	if p.err != nil && p.err != io.EOF {
		return p.err
	}
	if p.err == io.EOF && p.pos == len(p.buf) {
		return io.ErrUnexpectedEOF
	}
	return errSyntax
}

// peek skips white space and returns the next byte, or 0 at the end.
func (p *pageReader) peek() byte {
	for {
		for p.pos < len(p.buf) {
			switch c := p.buf[p.pos]; c {
			case ' ', '\t', '\n', '\r':
				p.pos++
			default:
				return c
			}
		}
		if !p.fill() {
			return 0
		}
	}
}

// consume takes the next byte when it is c.
func (p *pageReader) consume(c byte) bool {
	if p.peek() != c {
		return false
	}
	p.pos++
	return true
}

// literal takes the word w (true, false or null) when it comes next.
func (p *pageReader) literal(w string) bool {
	if p.peek() != w[0] {
		return false
	}
	for p.pos+len(w) > len(p.buf) {
		if !p.fill() {
			return false
		}
	}
	if string(p.buf[p.pos:p.pos+len(w)]) != w {
		return false
	}
	p.pos += len(w)
	return true
}

// next takes one more byte of the value being read, or reports false.
func (p *pageReader) next() (byte, bool) {
	if p.pos == len(p.buf) && !p.fill() {
		return 0, false
	}
	c := p.buf[p.pos]
	p.pos++
	return c, true
}

// appendString reads a JSON string and appends its text to dst, with each
// invalid UTF-8 byte and unpaired surrogate replaced by U+FFFD, as
// encoding/json does.
func (p *pageReader) appendString(dst []byte) ([]byte, error) {
	if !p.consume('"') {
		return dst, p.fail()
	}
	start := len(dst)
	ascii := true
	for {
		// The common run: plain characters up to a quote or an escape.
		i := p.pos
		for i < len(p.buf) {
			c := p.buf[i]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			ascii = ascii && c < utf8.RuneSelf
			i++
		}
		dst = append(dst, p.buf[p.pos:i]...)
		p.pos = i
		if i == len(p.buf) {
			if !p.fill() {
				return dst, p.fail()
			}
			continue
		}
		c, ok := p.next()
		switch {
		case !ok:
			return dst, p.fail()
		case c == '"':
			if !ascii && !utf8.Valid(dst[start:]) {
				dst = append(dst[:start], []byte(toValidUTF8(string(dst[start:])))...)
			}
			return dst, nil
		case c < 0x20:
			return dst, errSyntax
		}
		e, ok := p.next()
		if !ok {
			return dst, p.fail()
		}
		switch e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return dst, err
			}
			if utf16.IsSurrogate(r) { // a pair, or U+FFFD
				for p.pos+6 > len(p.buf) && p.fill() {
				}
				if p.pos+6 <= len(p.buf) && p.buf[p.pos] == '\\' && p.buf[p.pos+1] == 'u' {
					save := p.pos
					p.pos += 2
					r2, err := p.hex4()
					if err != nil {
						return dst, err
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
					} else {
						p.pos = save
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, errSyntax
		}
	}
}

// toValidUTF8 replaces each byte of s that is not part of valid UTF-8 with
// U+FFFD.
func toValidUTF8(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s { // an invalid byte ranges as one U+FFFD
		out = append(out, r)
	}
	return string(out)
}

// hex4 reads the four hex digits of a \u escape.
func (p *pageReader) hex4() (rune, error) {
	var r rune
	for range 4 {
		c, ok := p.next()
		if !ok {
			return 0, p.fail()
		}
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, errSyntax
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}

// number reads a JSON number and returns its text.
func (p *pageReader) number() (string, error) {
	var b []byte
	for {
		for p.pos < len(p.buf) {
			c := p.buf[p.pos]
			if !('0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
				return string(b), validNumber(b)
			}
			b = append(b, c)
			p.pos++
		}
		if !p.fill() {
			if p.err != nil && p.err != io.EOF {
				return "", p.err
			}
			return string(b), validNumber(b)
		}
	}
}

// validNumber checks b against JSON's number grammar.
func validNumber(b []byte) error {
	i := 0
	digits := func() bool {
		n := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if !digits() {
		return errSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return errSyntax
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return errSyntax
		}
	}
	if i != len(b) {
		return errSyntax
	}
	return nil
}

// skip reads one value of any kind and discards it.
func (p *pageReader) skip(depth int) error {
	if depth > maxSkipDepth {
		return errors.New("nested too deeply")
	}
	switch p.peek() {
	case '"':
		var err error
		p.str, err = p.appendString(p.str[:0])
		return err
	case '{':
		p.pos++
		return p.members(func([]byte) error { return p.skip(depth + 1) })
	case '[':
		p.pos++
		return p.elements(func() error { return p.skip(depth + 1) })
	case 't':
		return p.word("true")
	case 'f':
		return p.word("false")
	case 'n':
		return p.word("null")
	}
	_, err := p.number()
	return err
}

func (p *pageReader) word(w string) error {
	if !p.literal(w) {
		return p.fail()
	}
	return nil
}

// members reads the members of an object whose { was taken, calling value
// with each key to read its value. The key is valid until value reads.
func (p *pageReader) members(value func(key []byte) error) error {
	if p.consume('}') {
		return nil
	}
	for {
		var err error
		if p.str, err = p.appendString(p.str[:0]); err != nil {
			return err
		}
		if !p.consume(':') {
			return p.fail()
		}
		if err := value(p.str); err != nil {
			return err
		}
		if p.consume('}') {
			return nil
		}
		if !p.consume(',') {
			return p.fail()
		}
	}
}

// elements reads the elements of an array whose [ was taken, calling value
// to read each.
func (p *pageReader) elements(value func() error) error {
	if p.consume(']') {
		return nil
	}
	for {
		if err := value(); err != nil {
			return err
		}
		if p.consume(']') {
			return nil
		}
		if !p.consume(',') {
			return p.fail()
		}
	}
}

// keyIs reports whether an object's key names the member name: exactly,
// or equal under Unicode case folding, as encoding/json matches them.
func keyIs(key []byte, name string) bool {
	return string(key) == name || bytes.EqualFold(key, []byte(name))
}

// claimFields are the string members of a claim, in the order their text
// is kept in claimText.
var claimFields = [...]string{"claim_id", "namespace", "public_key", "service", "subject", "agent_id", "agent_name"}

// claim reads one claim object. Its strings share one allocation. A member
// of the wrong type fails the page, as it would with encoding/json; null
// leaves a member empty, and unknown members are skipped.
func (p *pageReader) claim(text []byte) (Claim, []byte, error) {
	if !p.consume('{') {
		if p.literal("null") {
			return Claim{}, text, nil
		}
		return Claim{}, text, p.fail()
	}
	var ends [len(claimFields)][2]int
	var c Claim
	text = text[:0]
	err := p.members(func(key []byte) error {
		if keyIs(key, "approved_at") {
			if p.literal("null") {
				c.ApprovedAt = time.Time{}
				return nil
			}
			var err error
			if p.str, err = p.appendString(p.str[:0]); err != nil {
				return err
			}
			if err := c.ApprovedAt.UnmarshalText(p.str); err != nil {
				return fmt.Errorf("approved_at: %w", err)
			}
			return nil
		}
		for f, name := range claimFields {
			if !keyIs(key, name) {
				continue
			}
			if p.literal("null") {
				return nil
			}
			start := len(text)
			var err error
			if text, err = p.appendString(text); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			ends[f] = [2]int{start, len(text)}
			return nil
		}
		return p.skip(0)
	})
	if err != nil {
		return Claim{}, text, err
	}
	all := string(text)
	field := func(f int) string { return all[ends[f][0]:ends[f][1]] }
	c.ID, c.Namespace, c.PublicKey, c.Service = field(0), field(1), field(2), field(3)
	c.Subject, c.AgentID, c.AgentName = field(4), field(5), field(6)
	return c, text, nil
}

// integer reads a JSON integer member into *dst (a new int), or leaves
// *dst nil for null.
func (p *pageReader) integer(dst **int) error {
	if p.literal("null") {
		*dst = nil
		return nil
	}
	s, err := p.number()
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%s is not an integer", s)
	}
	*dst = &n
	return nil
}

// boolean reads a JSON boolean member into *dst, or leaves *dst nil for
// null.
func (p *pageReader) boolean(dst **bool) error {
	for _, v := range []bool{true, false} {
		if p.literal(strconv.FormatBool(v)) {
			*dst = &v
			return nil
		}
	}
	if p.literal("null") {
		*dst = nil
		return nil
	}
	return errors.New("not a boolean")
}
