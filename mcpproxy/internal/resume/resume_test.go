package resume_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/idnhq/idn/mcpproxy/internal/resume"
)

// event is one event of a stream's body: its id and data.
type event struct{ id, data string }

func events(body string) []event {
	var out []event
	for block := range strings.SplitSeq(body, "\n\n") {
		var ev event
		for line := range strings.SplitSeq(block, "\n") {
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				ev.id = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev.data = v
			}
		}
		if ev.id != "" {
			out = append(out, ev)
		}
	}
	return out
}

// serve opens a stream of l after lastEventID (none when empty) and
// accepts it, as the SDK's server does; it returns the stream and what it
// was sent.
func serve(t *testing.T, l *resume.Log, lastEventID string, prime bool) (*resume.Stream, *httptest.ResponseRecorder) {
	t.Helper()
	rec := httptest.NewRecorder()
	var ids []string
	if lastEventID != "" {
		ids = []string{lastEventID}
	}
	w, r, err := l.Open(rec, get(ids...), prime, func() { t.Errorf("a resume after %q was refused when accepted", lastEventID) })
	if err != nil {
		t.Fatalf("resume after %q: %v", lastEventID, err)
	}
	if r.Header.Get("Last-Event-ID") != "" {
		t.Error("the request for the SDK's server has a Last-Event-ID")
	}
	w.WriteHeader(http.StatusOK)
	return w, rec
}

// get is a GET of a stream with the Last-Event-ID headers ids.
func get(ids ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/mcp/mcp1", nil)
	for _, id := range ids {
		r.Header.Add("Last-Event-ID", id)
	}
	return r
}

// A stream resumed after an id is sent the events that followed it,
// whether sent while a stream was open or none was, the SDK's and the
// log's own alike, once each and in order, and then what comes next, in
// the same sequence.
func TestResumeSendsWhatFollowed(t *testing.T) {
	l := resume.NewLog()
	first, rec := serve(t, l, "", true)
	l.Send([]byte(`"a"`))
	for _, other := range []string{": ok\n\n", "event: close\nretry: 100\ndata: \n\n"} {
		if _, err := first.Write([]byte(other)); err != nil {
			t.Fatal(err)
		}
	}
	l.Send([]byte(`"b"`))
	if _, err := first.Write([]byte("event: message\ndata: \"c\"\n\n")); err != nil {
		t.Fatal(err)
	}
	first.Close()
	if l.Send([]byte(`"d"`)) {
		t.Error("Send reported a stream after it closed")
	}
	got := events(rec.Body.String())
	tag, _, _ := strings.Cut(got[0].id, "-")
	id := func(n int) string { return fmt.Sprintf("%s-%d", tag, n) }
	if want := []event{{id(0), ""}, {id(1), `"a"`}, {id(2), `"b"`}, {id(3), `"c"`}}; !slices.Equal(got, want) {
		t.Fatalf("the first stream was sent %v, want %v", got, want)
	}

	second, rec := serve(t, l, id(2), true)
	l.Send([]byte(`"e"`))
	if want := []event{{id(3), `"c"`}, {id(4), `"d"`}, {id(4), ""}, {id(5), `"e"`}}; !slices.Equal(events(rec.Body.String()), want) {
		t.Errorf("the resumed stream was sent %v, want %v", events(rec.Body.String()), want)
	}
	second.Close()

	_, rec = serve(t, l, "", false)
	if got := events(rec.Body.String()); got != nil {
		t.Errorf("a stream opened without Last-Event-ID was sent %v", got)
	}
}

// A Last-Event-ID the log cannot resume after is refused, so that a
// client never takes a stream with a gap, or another's events, for its
// own.
func TestResumeRefuses(t *testing.T) {
	other := resume.NewLog()
	other.Send([]byte(`"theirs"`))
	_, rec := serve(t, other, "", true)
	theirs := events(rec.Body.String())[0].id

	l := resume.NewLog()
	for i := range resume.MaxEvents + 1 {
		l.Send(fmt.Appendf(nil, "%d", i))
	}
	_, rec = serve(t, l, "", true)
	tag, last, _ := strings.Cut(events(rec.Body.String())[0].id, "-")
	if last != fmt.Sprint(resume.MaxEvents+1) {
		t.Fatalf("the latest id is %s, want %d", last, resume.MaxEvents+1)
	}
	for _, tt := range []struct {
		name string
		ids  []string
	}{
		{"an id of another session's stream", []string{theirs}},
		{"an id the stream has not sent", []string{tag + "-" + fmt.Sprint(resume.MaxEvents+2)}},
		{"an id whose followers are no longer all kept", []string{tag + "-0"}},
		{"an id with its number padded", []string{tag + "-01"}},
		{"an id without a tag", []string{"5"}},
		{"two ids", []string{tag + "-1", tag + "-2"}},
	} {
		if _, _, err := l.Open(httptest.NewRecorder(), get(tt.ids...), false, nil); !errors.Is(err, resume.ErrCannotResume) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	// The oldest kept is the second event: the first's followers are all kept.
	_, rec = serve(t, l, tag+"-1", false)
	if got := events(rec.Body.String()); len(got) != resume.MaxEvents || got[0].data != "1" {
		t.Errorf("a resume after the oldest dropped event was sent %d events from %v", len(got), got[0])
	}
}

// The log keeps at most MaxBytes of events: the oldest go first, and an
// event larger than the bound is sent but not kept.
func TestResumeBytesBound(t *testing.T) {
	l := resume.NewLog()
	_, rec := serve(t, l, "", true)
	half := strings.Repeat("x", resume.MaxBytes/2)
	l.Send([]byte(`"` + half + `"`))
	l.Send([]byte(`"` + half + `"`))
	l.Send([]byte(`"` + strings.Repeat("y", resume.MaxBytes) + `"`))
	got := events(rec.Body.String())
	if len(got) != 4 {
		t.Fatalf("the stream was sent %d events, want 4", len(got))
	}
	for _, tt := range []struct {
		name   string
		after  string
		resume bool
	}{
		{"a resume after the first half, whose follower was dropped for the second", got[1].id, false},
		{"a resume after the second half, whose follower was too large to keep", got[2].id, false},
		{"a resume after the latest", got[3].id, true},
	} {
		_, _, err := l.Open(httptest.NewRecorder(), get(tt.after), false, nil)
		if (err == nil) != tt.resume {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// When the events after a stream's Last-Event-ID are dropped between the
// check and the stream's acceptance, the stream is sent none of them,
// and refused.
func TestResumeRefusesAGapAtAcceptance(t *testing.T) {
	l := resume.NewLog()
	l.Send([]byte(`"a"`))
	_, rec := serve(t, l, "", true)
	after := events(rec.Body.String())[0].id
	refused := false
	rec = httptest.NewRecorder()
	w, _, err := l.Open(rec, get(after), true, func() { refused = true })
	if err != nil {
		t.Fatal(err)
	}
	for range resume.MaxEvents + 1 {
		l.Send([]byte(`"more"`))
	}
	w.WriteHeader(http.StatusOK)
	if !refused || rec.Body.Len() != 0 {
		t.Errorf("refused %v, sent %q", refused, rec.Body.String())
	}
	if _, err := w.Write([]byte("data: \"late\"\n\n")); err == nil {
		t.Error("a refused stream took an event")
	}
}
