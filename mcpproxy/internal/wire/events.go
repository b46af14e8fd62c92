package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxEventBytes bounds one event of an upstream's event stream, as the
// SDK's client does by default.
const MaxEventBytes = 16 << 20

// EventReader reads the data of server-sent events, and keeps what a
// client needs to resume the stream: the last event id and the server's
// reconnection time.
type EventReader struct {
	r     *bufio.Reader
	data  []byte
	idBuf string        // the id field last read
	last  string        // the last event id: idBuf as of the last event
	retry time.Duration // the server's retry field; 0 when it sent none
}

// Next returns the data of the next event that has any (its data lines
// joined by newlines), valid until the following call. Event names and
// comments say nothing here and are skipped; ids and retry fields are
// kept (LastID, Retry), as the SSE specification reads them.
func (e *EventReader) Next() ([]byte, error) {
	e.data = e.data[:0]
	for {
		line, err := e.line()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			e.last = e.idBuf
			if len(e.data) > 0 {
				return e.data, nil
			}
			continue
		}
		name, v, _ := bytes.Cut(line, []byte(":"))
		v = bytes.TrimPrefix(v, []byte(" "))
		switch string(name) {
		case "data":
			if len(e.data) > 0 {
				e.data = append(e.data, '\n')
			}
			e.data = append(e.data, v...)
		case "id":
			if bytes.IndexByte(v, 0) < 0 {
				e.idBuf = string(v)
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(v), 10, 32); err == nil {
				e.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

// LastID is the id of the last event read, empty when the server gave
// none: the stream cannot be resumed.
func (e *EventReader) LastID() string { return e.last }

// Retry is the reconnection time the server set, 0 when it set none.
func (e *EventReader) Retry() time.Duration { return e.retry }

// Resume goes on reading from r, the stream resumed after LastID.
func (e *EventReader) Resume(r *bufio.Reader) {
	e.r, e.data = r, e.data[:0]
}

// line returns the next line without its line ending (LF or CRLF, as MCP
// servers write them), valid until the following read; an event's lines
// together may not exceed MaxEventBytes.
func (e *EventReader) line() ([]byte, error) {
	var line []byte
	for {
		chunk, err := e.r.ReadSlice('\n')
		if len(e.data)+len(line)+len(chunk) > MaxEventBytes {
			return nil, fmt.Errorf("tools/call: an event of the upstream's event stream exceeds %d bytes", MaxEventBytes)
		}
		switch {
		case err == nil && line == nil:
			return bytes.TrimSuffix(chunk[:len(chunk)-1], []byte("\r")), nil
		case err == nil:
			line = append(line, chunk[:len(chunk)-1]...)
			return bytes.TrimSuffix(line, []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			line = append(line, chunk...)
		default:
			return nil, err
		}
	}
}

// CallResult returns the result or error of msg when it answers the call
// id, and nil, nil for a response to anything else.
func CallResult(msg Incoming, id string) (*mcp.CallToolResult, error) {
	raw, err := Result(msg, id)
	if raw == nil || err != nil {
		return nil, err
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("tools/call: unreadable result: %w", err)
	}
	return &res, nil
}

// Result returns the result, as sent, or the error of msg when it answers
// the request id, and nil, nil for a response to anything else.
func Result(msg Incoming, id string) (json.RawMessage, error) {
	if key, ok := IDKey(msg.ID); !ok || key != strconv.Quote(id) {
		if (msg.ID == nil || string(msg.ID) == "null") && msg.Error != nil {
			// A server that cannot tell which request failed (a parse
			// error) answers with a null id.
			return nil, msg.Error
		}
		return nil, nil
	}
	if msg.Error != nil {
		return nil, msg.Error
	}
	if len(msg.Result) == 0 || string(msg.Result) == "null" {
		return nil, errors.New("the upstream's answer has neither result nor error")
	}
	return msg.Result, nil
}

// NewEventReader returns an EventReader of r.
func NewEventReader(r *bufio.Reader) *EventReader { return &EventReader{r: r} }
