package toolpin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonical returns the canonical form of the JSON text raw, after RFC
// 8785 (JSON Canonicalization Scheme). It has no insignificant
// whitespace and object members sorted by the UTF-16 code units of their
// names; strings are escaped minimally, numbers written as the shortest
// form of their IEEE-754 double (as ECMAScript does). Two texts of the same value have
// the same form, so a definition's hash does not depend on how its
// server spells it. Text that could be read two ways is refused rather
// than given one form: invalid UTF-8, a name twice in one object, a
// number beyond a double's range, anything after the value.
func Canonical(raw []byte) ([]byte, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("toolpin: JSON text is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b bytes.Buffer
	if err := canonicalValue(dec, &b); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("toolpin: data after the JSON value")
	}
	return b.Bytes(), nil
}

func canonicalValue(dec *json.Decoder, b *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("toolpin: reading JSON: %w", err)
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return canonicalArray(dec, b)
		}
		return canonicalObject(dec, b)
	case string:
		writeString(b, v)
	case json.Number:
		s, err := canonicalNumber(v)
		if err != nil {
			return err
		}
		b.WriteString(s)
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	}
	return nil
}

func canonicalArray(dec *json.Decoder, b *bytes.Buffer) error {
	b.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := canonicalValue(dec, b); err != nil {
			return err
		}
	}
	_, err := dec.Token() // ']'
	b.WriteByte(']')
	return err
}

type member struct {
	name  string
	key   []uint16
	value []byte
}

func canonicalObject(dec *json.Decoder, b *bytes.Buffer) error {
	var members []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("toolpin: reading JSON: %w", err)
		}
		name := tok.(string) // the decoder allows nothing else here
		if seen[name] {
			return fmt.Errorf("toolpin: the name %q appears twice in one object", name)
		}
		seen[name] = true
		var v bytes.Buffer
		if err := canonicalValue(dec, &v); err != nil {
			return err
		}
		members = append(members, member{name: name, key: utf16.Encode([]rune(name)), value: v.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return fmt.Errorf("toolpin: reading JSON: %w", err)
	}
	slices.SortFunc(members, func(x, y member) int { return slices.Compare(x.key, y.key) })
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, m.name)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return nil
}

// canonicalNumber writes n as ECMAScript's Number.prototype.toString
// writes its double: integers and decimals between 1e-6 and 1e21 in
// plain form, others with an exponent, -0 as 0.
func canonicalNumber(n json.Number) (string, error) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) {
		return "", fmt.Errorf("toolpin: the number %.40s is beyond a double's range", n)
	}
	if f == 0 {
		return "0", nil
	}
	if abs := math.Abs(f); abs >= 1e21 || abs < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mantissa, exp, _ := strings.Cut(s, "e")
		return mantissa + "e" + exp[:1] + strings.TrimLeft(exp[1:], "0"), nil
	}
	return strconv.FormatFloat(f, 'f', -1, 64), nil
}

// writeString writes s as RFC 8785 does: quote and backslash escaped,
// control characters as \b \t \n \f \r or \u00xx, everything else as is.
func writeString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}
