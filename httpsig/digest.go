package httpsig

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/dunglas/httpsfv"
)

// Content-Digest algorithm keys from the RFC 9530 §5 "Hash Algorithms for
// HTTP Digest Fields" registry that this package computes and checks.
const (
	DigestSHA256 = "sha-256"
	DigestSHA512 = "sha-512"
)

// ContentDigest returns a Content-Digest field value (RFC 9530 §2) with one
// member for alg over body, e.g. "sha-256=:<base64>:".
func ContentDigest(alg string, body []byte) (string, error) {
	var sum []byte
	switch alg {
	case DigestSHA256:
		s := sha256.Sum256(body)
		sum = s[:]
	case DigestSHA512:
		s := sha512.Sum512(body)
		sum = s[:]
	default:
		return "", errors.New("httpsig: unsupported digest algorithm " + quoteForError(alg))
	}
	out := make([]byte, 0, len(alg)+3+base64.StdEncoding.EncodedLen(len(sum)))
	out = append(out, alg...)
	out = append(out, '=', ':')
	out = base64.StdEncoding.AppendEncode(out, sum)
	out = append(out, ':')
	return string(out), nil
}

// VerifyContentDigest checks a Content-Digest field value (all field lines
// joined with ", ") against body. Members for sha-256 and sha-512 are
// recomputed and compared in constant time; every such member must match.
// Members for other algorithms are ignored, but at least one known member
// is required. A malformed field wraps ErrHeadersInvalid; a mismatch or
// the absence of a known algorithm wraps ErrSignatureInvalid.
func VerifyContentDigest(header string, body []byte) error {
	dict, err := httpsfv.UnmarshalDictionary([]string{header})
	if err != nil {
		return wrapError(ErrHeadersInvalid, "content-digest is not a structured dictionary", err)
	}
	known := 0
	for _, name := range dict.Names() {
		if name != DigestSHA256 && name != DigestSHA512 {
			continue
		}
		m, _ := dict.Get(name)
		item, ok := m.(httpsfv.Item)
		if !ok {
			return newError(ErrHeadersInvalid, "content-digest member "+name+" is not a byte sequence")
		}
		got, ok := item.Value.([]byte)
		if !ok {
			return newError(ErrHeadersInvalid, "content-digest member "+name+" is not a byte sequence")
		}
		var want []byte
		if name == DigestSHA256 {
			s := sha256.Sum256(body)
			want = s[:]
		} else {
			s := sha512.Sum512(body)
			want = s[:]
		}
		if subtle.ConstantTimeCompare(got, want) != 1 {
			return newError(ErrSignatureInvalid, "content-digest "+name+" does not match the body")
		}
		known++
	}
	if known == 0 {
		return newError(ErrSignatureInvalid, "content-digest has no sha-256 or sha-512 member")
	}
	return nil
}

// ReadBody reads r.Body completely and replaces it with a reader over the
// same bytes, so later handlers see the body unchanged. A body longer than
// max bytes gives ErrBodyTooLarge; r.Body then still yields the whole
// original body. A nil or empty body gives (nil, nil).
func ReadBody(r *http.Request, max int64) ([]byte, error) {
	return readAndRestore(&r.Body, r.ContentLength, max)
}

func readAndRestore(body *io.ReadCloser, contentLength, max int64) ([]byte, error) {
	rc := *body
	if rc == nil || rc == http.NoBody {
		return nil, nil
	}
	if contentLength > max {
		return nil, newError(ErrBodyTooLarge, "body exceeds the size limit")
	}
	// The buffer grows with the bytes that arrive, never from the declared
	// length: a sender could claim max bytes and send a few, once per
	// connection.
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(rc, max+1))
	if err != nil {
		*body = readCloser{io.MultiReader(bytes.NewReader(buf.Bytes()), rc), rc}
		return nil, fmt.Errorf("httpsig: reading the body: %w", err)
	}
	if n > max {
		*body = readCloser{io.MultiReader(bytes.NewReader(buf.Bytes()), rc), rc}
		return nil, newError(ErrBodyTooLarge, "body exceeds the size limit")
	}
	rc.Close()
	b := buf.Bytes()
	*body = io.NopCloser(bytes.NewReader(b))
	return b, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}
