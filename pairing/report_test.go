package pairing_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing"
	"github.com/idnhq/idn/pairing/pairwire"
)

// fakeActivity is a control plane's activity route: it answers each
// report with the next of answers (200 once they run out) and hands the
// batches it took to the test.
type fakeActivity struct {
	batches chan pairwire.ActivityBatch
	answers chan int
	refused chan struct{} // a report was answered GATEWAY_NOT_PAIRED
}

func newFakeActivity(t *testing.T) (*fakeActivity, string) {
	f := &fakeActivity{batches: make(chan pairwire.ActivityBatch, 16), answers: make(chan int, 16), refused: make(chan struct{}, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != pairwire.ActivityPath || r.Header.Get("Signature") == "" || r.Header.Get("Content-Digest") == "" {
			t.Errorf("report to %s, signed %v", r.URL.Path, r.Header.Get("Signature") != "")
		}
		status := http.StatusOK
		select {
		case status = <-f.answers:
		default:
		}
		if status == http.StatusForbidden {
			w.WriteHeader(status)
			w.Write([]byte(`{"code":"GATEWAY_NOT_PAIRED","error":"not paired"}`))
			f.refused <- struct{}{}
			return
		}
		if status != http.StatusOK {
			w.WriteHeader(status)
			w.Write([]byte(`{"code":"DATABASE_BUSY","error":"busy"}`))
			return
		}
		var b pairwire.ActivityBatch
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			t.Error(err)
		}
		f.batches <- b
		w.Write([]byte(`{"accepted":1}`))
	}))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeActivity) next(t *testing.T) pairwire.ActivityBatch {
	t.Helper()
	select {
	case b := <-f.batches:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("no report arrived")
		return pairwire.ActivityBatch{}
	}
}

func newReporter(t *testing.T, url, dir string, queue int) *pairing.Reporter {
	t.Helper()
	id, err := identity.New("gw-host")
	if err != nil {
		t.Fatal(err)
	}
	r, err := pairing.NewReporter(pairing.ReporterConfig{ControlPlaneURL: url, Identity: id, DataDir: dir,
		Interval: 5 * time.Millisecond, MaxQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func decision(route string) pairing.Activity {
	return pairing.Activity{At: time.Now(), AgentName: "bot", AgentKey: "ed25519:k", Connection: "github", Service: "github",
		Method: "GET", Route: route, Allowed: true, Status: 200, Latency: 1500 * time.Microsecond}
}

func TestReporter(t *testing.T) {
	t.Run("a full queue drops and counts, never waits", func(t *testing.T) {
		f, url := newFakeActivity(t)
		f.answers <- http.StatusServiceUnavailable // holds the first batch back
		r := newReporter(t, url, "", 3)
		for i := range 5 {
			r.Record(decision("/r" + string(rune('a'+i))))
		}
		b := f.next(t)
		total := len(b.Records)
		for total < 3 {
			total += len(f.next(t).Records)
		}
		if r.Dropped() != 2 {
			t.Errorf("Dropped() = %d, want 2", r.Dropped())
		}
		if b.Dropped != 2 {
			t.Errorf("the batch tells of %d dropped records, want 2", b.Dropped)
		}
		if w := b.Records[0]; w.Route != "/ra" || w.Decision != "allow" || w.Protocol != "http" || w.LatencyMS != 1.5 {
			t.Errorf("first record on the wire %+v", w)
		}
	})
	t.Run("a batch the control plane could not take is sent again", func(t *testing.T) {
		f, url := newFakeActivity(t)
		f.answers <- http.StatusServiceUnavailable
		r := newReporter(t, url, "", 100)
		r.Record(decision("/once"))
		if b := f.next(t); len(b.Records) != 1 || b.Records[0].Route != "/once" {
			t.Fatalf("after a refusal the batch is %+v", b)
		}
	})
	t.Run("a gateway's own event is a record, not a refusal before a signature", func(t *testing.T) {
		f, url := newFakeActivity(t)
		r := newReporter(t, url, "", 100)
		r.Record(pairing.Activity{At: time.Now(), Connection: "docs", MCP: true, Tool: "docs.publish", Reason: "MCP_TOOL_CHANGED",
			Event: pairwire.EventToolChanged})
		b := f.next(t)
		if len(b.Records) != 1 || len(b.Unverified) != 0 {
			t.Fatalf("the event went as %+v", b)
		}
		if w := b.Records[0]; w.Event != pairwire.EventToolChanged || w.Decision != pairwire.DecisionDeny || w.Tool != "docs.publish" || w.AgentKey != "" || w.Method != "" {
			t.Errorf("the event on the wire %+v", w)
		}
	})
	t.Run("fields are clipped to what the control plane takes", func(t *testing.T) {
		f, url := newFakeActivity(t)
		r := newReporter(t, url, "", 100)
		a := decision("/x")
		a.AgentName, a.Tool = "bot\nforged line"+strings.Repeat("é", 100), strings.Repeat("t", 300)
		r.Record(a)
		w := f.next(t).Records[0]
		if len(w.AgentName) > 128 || strings.ContainsRune(w.AgentName, '\n') || len(w.Tool) != 128 {
			t.Errorf("clipped record %q %d", w.AgentName, len(w.Tool))
		}
	})
	t.Run("nothing is queued until the gateway is paired", func(t *testing.T) {
		f, url := newFakeActivity(t)
		dir := t.TempDir()
		r := newReporter(t, url, dir, 100)
		r.Record(decision("/before"))
		state := `{"gateway_id":"gw_1","namespace":"alice","registry_url":"` + url + `","paired_at":"2026-01-01T00:00:00Z"}`
		if err := os.WriteFile(filepath.Join(dir, "pairing.json"), []byte(state), 0o600); err != nil {
			t.Fatal(err)
		}
		// The state is read again within 2 s; record until it has been.
		deadline := time.Now().Add(10 * time.Second)
		for r.Sent() == 0 && time.Now().Before(deadline) {
			r.Record(decision("/after"))
			select {
			case b := <-f.batches:
				for _, w := range b.Records {
					if w.Route == "/before" {
						t.Fatal("a record from before the pairing was sent")
					}
				}
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		t.Fatal("no record was sent once the gateway was paired")
	})
	t.Run("attack: a flood of refusals before a signature is counted, never queued", func(t *testing.T) {
		f, url := newFakeActivity(t)
		f.answers <- http.StatusServiceUnavailable // the flood piles up behind it
		r := newReporter(t, url, "", 100)
		const flood = 20_000
		for i := range flood {
			reason := "AUTH_HEADERS_INVALID"
			if i%4 == 0 {
				reason = "AUTH_SIGNATURE_INVALID"
			}
			r.Record(pairing.Activity{At: time.Now(), Method: "GET", Reason: reason, Status: 403})
		}
		for range 50 {
			r.Record(decision("/genuine"))
		}
		counted, genuine := map[string]int64{}, 0
		for genuine < 50 || counted["AUTH_HEADERS_INVALID"]+counted["AUTH_SIGNATURE_INVALID"] < flood {
			b := f.next(t)
			for _, w := range b.Records {
				if w.AgentKey == "" || w.Route != "/genuine" {
					t.Fatalf("a refusal was queued as a record: %+v", w)
				}
				genuine++
			}
			for _, c := range b.Unverified {
				if c.Protocol != "http" || c.At == "" {
					t.Errorf("count %+v", c)
				}
				counted[c.Reason] += c.Count
			}
		}
		if genuine != 50 || counted["AUTH_HEADERS_INVALID"] != flood*3/4 || counted["AUTH_SIGNATURE_INVALID"] != flood/4 || r.Dropped() != 0 {
			t.Errorf("%d genuine records, counts %v, %d dropped", genuine, counted, r.Dropped())
		}
	})
	t.Run("attack: unsigned decisions cannot crowd out signed ones", func(t *testing.T) {
		f, url := newFakeActivity(t)
		f.answers <- http.StatusServiceUnavailable
		r := newReporter(t, url, "", 100)
		bypass := decision("/bypass")
		bypass.AgentName, bypass.AgentKey = "", ""
		for range 5_000 {
			r.Record(bypass)
		}
		for range 50 {
			r.Record(decision("/genuine"))
		}
		// The unsigned queue holds its bound, and as many again while a
		// batch taken from it waits to be sent again.
		genuine := 0
		for genuine < 50 {
			for _, w := range f.next(t).Records {
				if w.AgentKey != "" {
					genuine++
				}
			}
		}
		if d := r.Dropped(); d < 5_000-2*pairing.DefaultUnsignedReportQueue || d > 5_000-pairing.DefaultUnsignedReportQueue {
			t.Errorf("%d unsigned records dropped, want 5,000 less one or two queues' worth", d)
		}
	})
	t.Run("unpaired: reports stop", func(t *testing.T) {
		f, url := newFakeActivity(t)
		f.answers <- http.StatusForbidden
		r := newReporter(t, url, "", 100)
		r.Record(decision("/x"))
		<-f.refused
		r.Record(decision("/y"))
		select {
		case b := <-f.batches:
			t.Fatalf("a batch went out after the control plane said unpaired: %+v", b)
		case <-time.After(100 * time.Millisecond): // 20 intervals
		}
	})
}
