package httpsig

import (
	"encoding/base64"
	"errors"
	"strconv"

	"github.com/dunglas/httpsfv"
)

// This file serialises structured field values (RFC 9651 §4.1) straight into
// a byte buffer. Parsing is always done by httpsfv; serialising here avoids
// the intermediate strings.Builder copies on the verification hot path and
// yields exactly the canonical form httpsfv.Marshal produces.

var errNotSerializable = errors.New("httpsig: value cannot be serialised as a structured field")

// appendString serialises s as an sf-string (RFC 9651 §4.1.6).
func appendString(b []byte, s string) ([]byte, error) {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return b, errNotSerializable
		}
		if c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, c)
	}
	return append(b, '"'), nil
}

// appendBareItem serialises one bare item (RFC 9651 §4.1.3.1).
func appendBareItem(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case string:
		return appendString(b, v)
	case httpsfv.Token:
		return append(b, v...), nil
	case bool:
		if v {
			return append(b, "?1"...), nil
		}
		return append(b, "?0"...), nil
	case []byte:
		b = append(b, ':')
		b = base64.StdEncoding.AppendEncode(b, v)
		return append(b, ':'), nil
	default:
		// Decimals, dates and display strings are rare in signature
		// material; let httpsfv apply its exact rounding and escaping rules.
		s, err := httpsfv.Marshal(httpsfv.Item{Value: v, Params: httpsfv.NewParams()})
		if err != nil {
			return b, errNotSerializable
		}
		return append(b, s...), nil
	}
}

// appendParams serialises parameters (RFC 9651 §4.1.1.2).
func appendParams(b []byte, p *httpsfv.Params) ([]byte, error) {
	if p == nil {
		return b, nil
	}
	var err error
	for _, k := range p.Names() {
		b = append(b, ';')
		b = append(b, k...)
		v, _ := p.Get(k)
		if v == true {
			continue
		}
		b = append(b, '=')
		if b, err = appendBareItem(b, v); err != nil {
			return b, err
		}
	}
	return b, nil
}

func appendItem(b []byte, it httpsfv.Item) ([]byte, error) {
	b, err := appendBareItem(b, it.Value)
	if err != nil {
		return b, err
	}
	return appendParams(b, it.Params)
}

func appendInnerList(b []byte, il httpsfv.InnerList) ([]byte, error) {
	b = append(b, '(')
	var err error
	for i, it := range il.Items {
		if i > 0 {
			b = append(b, ' ')
		}
		if b, err = appendItem(b, it); err != nil {
			return b, err
		}
	}
	b = append(b, ')')
	return appendParams(b, il.Params)
}

func appendMember(b []byte, m httpsfv.Member) ([]byte, error) {
	switch m := m.(type) {
	case httpsfv.Item:
		return appendItem(b, m)
	case httpsfv.InnerList:
		return appendInnerList(b, m)
	}
	return b, errNotSerializable
}

func appendList(b []byte, l httpsfv.List) ([]byte, error) {
	var err error
	for i, m := range l {
		if i > 0 {
			b = append(b, ", "...)
		}
		if b, err = appendMember(b, m); err != nil {
			return b, err
		}
	}
	return b, nil
}

func appendDictionary(b []byte, d *httpsfv.Dictionary) ([]byte, error) {
	var err error
	for i, k := range d.Names() {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, k...)
		m, _ := d.Get(k)
		if it, ok := m.(httpsfv.Item); ok && it.Value == true {
			if b, err = appendParams(b, it.Params); err != nil {
				return b, err
			}
			continue
		}
		b = append(b, '=')
		if b, err = appendMember(b, m); err != nil {
			return b, err
		}
	}
	return b, nil
}
