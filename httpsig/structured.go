package httpsig

import (
	"github.com/dunglas/httpsfv"
)

type sfType uint8

const (
	sfItem sfType = iota + 1
	sfList
	sfDictionary
)

// structuredFields lists the fields whose structured type is known, which
// ";sf" needs (RFC 9421 §2.1.1): the registered structured fields of the
// IANA "HTTP Field Name" registry that signatures plausibly cover.
var structuredFields = map[string]sfType{
	"accept-ch":                    sfList,
	"accept-signature":             sfDictionary,
	"cache-status":                 sfList,
	"cdn-cache-control":            sfDictionary,
	"client-cert":                  sfItem,
	"client-cert-chain":            sfList,
	"content-digest":               sfDictionary,
	"cross-origin-embedder-policy": sfItem,
	"cross-origin-opener-policy":   sfItem,
	"origin-agent-cluster":         sfItem,
	"priority":                     sfDictionary,
	"proxy-status":                 sfList,
	"repr-digest":                  sfDictionary,
	"signature":                    sfDictionary,
	"signature-input":              sfDictionary,
	"want-content-digest":          sfDictionary,
	"want-repr-digest":             sfDictionary,
}

// appendStructured parses the field lines as the field's structured type
// and appends the strict re-serialisation (RFC 9421 §2.1.1).
func appendStructured(b []byte, name string, lines []string) ([]byte, error) {
	var err error
	switch structuredFields[name] {
	case sfDictionary:
		var d *httpsfv.Dictionary
		if d, err = httpsfv.UnmarshalDictionary(lines); err == nil {
			return appendDictionary(b, d)
		}
	case sfList:
		var l httpsfv.List
		if l, err = httpsfv.UnmarshalList(lines); err == nil {
			return appendList(b, l)
		}
	case sfItem:
		var it httpsfv.Item
		if it, err = httpsfv.UnmarshalItem(lines); err == nil {
			return appendItem(b, it)
		}
	default:
		return b, newError(ErrComponentsInvalid, "field "+quoteForError(name)+" is not a known structured field")
	}
	return b, wrapError(ErrComponentsInvalid, "field "+name+" is not a valid structured field", err)
}
