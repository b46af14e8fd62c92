package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/kit/bodybudget"
)

// DefaultMaxInflightBodyBytes is the zero Config's cap on the request body
// bytes buffered at once across all requests.
const DefaultMaxInflightBodyBytes = 256 << 20

// firstBodyChunk is the buffer a body read starts with; it doubles as bytes
// arrive.
const firstBodyChunk = 16 << 10

// errBodyBudget reports that buffering a body would pass
// Config.MaxInflightBodyBytes.
var errBodyBudget = errors.New("proxy: in-flight request bodies at capacity")

// readBody reads the whole body of an admitted request, at most max bytes,
// into a buffer that grows only as bytes arrive: the declared length caps
// growth but never sizes an allocation beyond firstBodyChunk. It returns
// the body and the budget bytes held for it, which the caller gives back
// when the request is done (also after an error). A body longer than max
// gives an *http.MaxBytesError; passing the budget gives errBodyBudget.
func readBody(r io.Reader, declared, max int64, budget *bodybudget.Budget) (body []byte, held int64, err error) {
	limit := max
	if declared >= 0 && declared < limit {
		limit = declared
	}
	size := min(int64(firstBodyChunk), limit)
	if size == 0 {
		size = 1 // room to learn whether an undeclared body is empty
	}
	if !budget.Take(size) {
		return nil, 0, errBodyBudget
	}
	held = size
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			// Probe before growing: a body that ends exactly here needs
			// no larger buffer.
			var one [1]byte
			n, err := io.ReadFull(r, one[:])
			if n == 0 {
				if err == io.EOF {
					return buf, held, nil
				}
				return nil, held, err
			}
			if int64(len(buf)) >= max {
				return nil, held, &http.MaxBytesError{Limit: max}
			}
			grown := min(2*int64(cap(buf)), max)
			if declared > int64(len(buf)) {
				grown = min(grown, declared)
			}
			if !budget.Take(grown - int64(cap(buf))) {
				return nil, held, errBodyBudget
			}
			held += grown - int64(cap(buf))
			next := make([]byte, len(buf), grown)
			copy(next, buf)
			buf = append(next, one[0])
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, held, nil
		}
		if err != nil {
			return nil, held, err
		}
	}
}

// bufferBody replaces r.Body by the whole body, read under the handler's
// limits, and returns the bytes read and the budget bytes to give back.
func (h *Handler) bufferBody(r *http.Request) ([]byte, int64, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, 0, nil
	}
	body, held, err := readBody(r.Body, r.ContentLength, h.cfg.MaxBodyBytes, &h.bodies)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, errBodyBudget), errors.As(err, &tooLarge):
		return nil, held, err
	case err != nil: // the client stopped sending or broke the framing
		return nil, held, newError(errcode.ValidationError, err)
	}
	r.ContentLength, r.TransferEncoding = int64(len(body)), nil
	if len(body) == 0 {
		r.Body = http.NoBody
	} else {
		r.Body = io.NopCloser(bytes.NewReader(body))
		// An OAuth upstream's 401 is retried with a fresh token.
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return body, held, nil
}
