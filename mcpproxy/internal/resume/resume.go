// Package resume makes an agent session's own event stream (GET) of the
// MCP endpoint resumable. It follows MCP Streamable HTTP (2025-11-25,
// resumability and redelivery).
//
// Every event written to the stream gets the next id of the session's one
// sequence. That holds for the SDK's server and for the endpoint, which
// writes task status and progress (the SDK cannot send them). The latest
// events are kept, within a bound. A client that lost the stream opens it
// again with Last-Event-ID. It is then sent the events after that id,
// once each, in order, before anything new.
//
// A Log belongs to one session, and its ids carry a random tag of its
// own. An id of another session's stream names no event of this one. So
// it is refused rather than read as a position in this log.
// What the endpoint sends while no stream is open (Send) is kept too, and
// so replayed on resume; the SDK's server sends only to an open stream.
// A Log holds at most MaxEvents events and MaxBytes of them. So what the
// endpoint keeps grows with its sessions alone (64 KiB each, plus the
// slice of at most 2*MaxEvents headers).
package resume

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// The bound of a Log: the latest MaxEvents events, and no more than
// MaxBytes of them (an event larger than MaxBytes is written but not
// kept). A resume after an event older than the oldest kept is refused
// rather than answered with a gap.
const (
	MaxEvents = 128
	MaxBytes  = 64 << 10
)

const lastEventIDHeader = "Last-Event-ID"

// ErrCannotResume is returned by Open for a Last-Event-ID the stream
// cannot resume after: malformed, of another stream, or older than what
// is kept.
var ErrCannotResume = errors.New("resume: Last-Event-ID names no event this stream can resume after")

var (
	errDetached = errors.New("resume: the stream is not attached to its log")
	errBroken   = errors.New("resume: writing to the stream failed")
)

// Primes reports whether a session of protocol version (nil: not
// settled) has its streams primed: from 2025-11-25, whose clients take an
// event without data as only an id to resume after.
func Primes(version *string) bool { return version != nil && *version >= "2025-11-25" }

// A Log is the numbered, bounded record of one session's event stream,
// and the stream it writes to while one is open. The zero Log is not
// usable: make one with NewLog.
type Log struct {
	tag string // prefix of the log's ids

	mu     sync.Mutex // held while writing to the open stream, so ids go out in order
	events [][]byte   // the kept events, oldest first, without their ids
	first  uint64     // the id of events[0]; events are numbered from 1
	size   int        // bytes in events
	live   *Stream    // the open stream, nil when none
}

// NewLog returns an empty log with an id tag of its own.
func NewLog() *Log {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Log{tag: hex.EncodeToString(b[:]), first: 1}
}

// last is the id of the latest event, 0 when there is none (l.mu held).
func (l *Log) last() uint64 { return l.first + uint64(len(l.events)) - 1 }

func (l *Log) id(n uint64) string { return l.tag + "-" + strconv.FormatUint(n, 10) }

// after reads a Last-Event-ID of this log as the number of the event it
// names (l.mu held); false when the events after it are not all kept.
func (l *Log) after(lastEventID string) (uint64, bool) {
	tag, num, ok := strings.Cut(lastEventID, "-")
	if !ok || tag != l.tag {
		return 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != num || n > l.last() || n+1 < l.first {
		return 0, false
	}
	return n, true
}

// Open returns the writer of the stream r asks for, about to be served on
// w, and r as the SDK's server is to get it. The writer numbers and keeps
// the events written to it. Once the stream is accepted (WriteHeader
// 200), it is first sent the kept events after r's Last-Event-ID, when it
// has one. Then, when prime is set, it is sent an event with the latest
// id and no data; a client resumes after that one when nothing newer
// reached it.
//
// A Last-Event-ID the log cannot resume after is ErrCannotResume. If the
// events after it are dropped before the stream is accepted, the stream
// is not attached and refuse is called, to end it. The request returned
// has no Last-Event-ID: the log resumes the stream, and the SDK's server,
// which keeps no events, would refuse one.
func (l *Log) Open(w http.ResponseWriter, r *http.Request, prime bool, refuse func()) (*Stream, *http.Request, error) {
	s := &Stream{ResponseWriter: w, log: l, prime: prime, refuse: refuse}
	switch ids := r.Header.Values(lastEventIDHeader); len(ids) {
	case 0:
		return s, r, nil
	case 1:
		s.resume, s.lastEventID = true, ids[0]
	default:
		return nil, nil, ErrCannotResume
	}
	l.mu.Lock()
	_, ok := l.after(s.lastEventID)
	l.mu.Unlock()
	if !ok {
		return nil, nil, ErrCannotResume
	}
	r = r.Clone(r.Context())
	r.Header.Del(lastEventIDHeader)
	return s, r, nil
}

// Send writes msg (one JSON-RPC message on one line) as an event of the
// log's stream: kept, and sent when a stream is open; false when none is.
func (l *Log) Send(msg []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.append(framed(msg))
}

// framed is msg framed as a message event.
func framed(msg []byte) []byte {
	return append(append([]byte("event: message\ndata: "), msg...), "\n\n"...)
}

// SendOpen is Send while a stream is open, and does nothing (false) when
// none is. It is for a request to the client: its asker waits for the
// answer only so long, and a stream opened later must not carry it.
func (l *Log) SendOpen(msg []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.live == nil {
		return false
	}
	return l.append(framed(msg))
}

// Streaming reports whether a stream is open.
func (l *Log) Streaming() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.live != nil
}

// append numbers and keeps event and writes it to the open stream, if
// any (l.mu held).
func (l *Log) append(event []byte) bool {
	l.events = append(l.events, event)
	l.size += len(event)
	for len(l.events) > MaxEvents || l.size > MaxBytes {
		l.size -= len(l.events[0])
		l.events[0] = nil
		l.events = l.events[1:]
		l.first++
	}
	return l.live != nil && l.live.write(l.id(l.last()), event)
}

// Stream is the ResponseWriter of a session's event stream (GET), served
// by the SDK's server. The SDK writes whole events, each in one Write.
// Those that carry a message are numbered and kept; the rest (comments,
// the close event) pass as they are.
type Stream struct {
	http.ResponseWriter
	log         *Log
	resume      bool
	lastEventID string
	prime       bool
	refuse      func()
	broken      bool // a write failed: the client is gone
}

func (w *Stream) WriteHeader(code int) {
	l := w.log
	l.mu.Lock()
	defer l.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
	if code != http.StatusOK {
		return
	}
	from := l.last() + 1
	if w.resume {
		n, ok := l.after(w.lastEventID)
		if !ok {
			w.refuse()
			return
		}
		from = n + 1
	}
	for n := from; n <= l.last(); n++ {
		if !w.write(l.id(n), l.events[n-l.first]) {
			return
		}
	}
	if w.prime {
		w.write(l.id(l.last()), []byte("event: prime\ndata: \n\n"))
	}
	l.live = w
}

// Write keeps and numbers an event of the SDK's; anything else passes.
// An event is refused while the stream is not attached to its log (it
// was refused a resume, and is ending).
func (w *Stream) Write(b []byte) (int, error) {
	l := w.log
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !isEvent(b):
		return w.ResponseWriter.Write(b)
	case l.live != w:
		return 0, errDetached
	case !l.append(bytes.Clone(b)):
		return 0, errBroken
	}
	return len(b), nil
}

func (w *Stream) Flush() {
	w.log.mu.Lock()
	defer w.log.mu.Unlock()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *Stream) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// write sends one event with id and flushes it (log's mu held); false
// once a write failed.
func (w *Stream) write(id string, event []byte) bool {
	if w.broken {
		return false
	}
	if _, err := w.ResponseWriter.Write(append([]byte("id: "+id+"\n"), event...)); err != nil {
		w.broken = true
		return false
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
	return true
}

// Close detaches the stream from its log: the SDK's handler returned.
func (w *Stream) Close() {
	w.log.mu.Lock()
	defer w.log.mu.Unlock()
	if w.log.live == w {
		w.log.live = nil
	}
}

// isEvent reports whether b, one write of the SDK's, is an event that
// carries a message (a data field with content), rather than a comment
// or an event about the stream itself (the SDK's close, without data).
func isEvent(b []byte) bool {
	for line := range bytes.Lines(b) {
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok && len(bytes.TrimSpace(data)) > 0 {
			return true
		}
	}
	return false
}
