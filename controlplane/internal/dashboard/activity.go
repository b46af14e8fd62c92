package dashboard

import (
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/idnhq/idn/controlplane/internal/activity"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/pairing/pairwire"
)

// The dashboard's Activity page: what the owner's paired gateways decided,
// rendered from the activity part's read API, with its filters as a GET
// form and older records behind a keyset pager link.

func (d *Dashboard) activityPages(m web.Mux) {
	m.Handle("GET /activity", http.HandlerFunc(d.ownerPage("activity", "Activity", d.activityView)))
}

// activityRanges are the time ranges the page offers, "" meaning all.
var activityRanges = []struct {
	Value, Label string
	Span         time.Duration
}{
	{"1h", "Last hour", time.Hour},
	{"24h", "Last 24 hours", 24 * time.Hour},
	{"7d", "Last 7 days", 7 * 24 * time.Hour},
	{"", "Everything kept", 0},
}

type activityOption struct {
	Value, Label string
	Selected     bool
}

type activityRow struct {
	activity.Record
	When, Latency string
	AtISO         string
	EventText     string // what a gateway's own event was, in words
}

// eventTexts say what each event a gateway reports was.
var eventTexts = map[string]string{
	pairwire.EventToolPinned:   "tool pinned at its first listing",
	pairwire.EventToolChanged:  "tool definition changed; hidden until reviewed",
	pairwire.EventToolNew:      "new tool; hidden until reviewed",
	pairwire.EventToolAccepted: "tool definition accepted",
	pairwire.EventToolRejected: "tool definition rejected; kept hidden",
}

type activityPage struct {
	Agent, Connection, Service, Decision string
	Ranges, Decisions                    []activityOption
	Rows                                 []activityRow
	NextURL                              string
	// ExportJSONL and ExportCSV are the export route with the filters;
	// built here from encoded values, so the template takes them as they
	// are.
	ExportJSONL, ExportCSV template.URL
	Filtered               bool
	// Chart counts the whole selection over time; nil when it is empty.
	Chart *chart
}

// activityPageSize is how many records one page shows.
const activityPageSize = 50

func (d *Dashboard) activityView(r *http.Request, ns string) (any, error) {
	q := r.URL.Query()
	v := activityPage{Agent: q.Get("agent"), Connection: q.Get("connection"), Service: q.Get("service"), Decision: q.Get("decision")}
	if v.Decision != "allow" && v.Decision != "deny" {
		v.Decision = ""
	}
	span := q.Get("range")
	f := activity.Filter{Agent: v.Agent, Connection: v.Connection, Service: v.Service, Decision: v.Decision}
	api := url.Values{}
	for k, val := range map[string]string{"agent": v.Agent, "connection": v.Connection, "service": v.Service, "decision": v.Decision} {
		if val != "" {
			api.Set(k, val)
		}
	}
	for _, rg := range activityRanges {
		sel := rg.Value == span
		v.Ranges = append(v.Ranges, activityOption{rg.Value, rg.Label, sel})
		if sel && rg.Span > 0 {
			f.Since = d.kit.Now().Add(-rg.Span).Truncate(time.Second)
			api.Set("since", f.Since.UTC().Format(time.RFC3339))
		}
	}
	for _, o := range []activityOption{{"", "Any decision", false}, {"allow", "Allowed", false}, {"deny", "Denied", false}} {
		o.Selected = o.Value == v.Decision
		v.Decisions = append(v.Decisions, o)
	}
	v.Filtered = len(api) > 0 // before format is added
	for _, fmtName := range []string{"jsonl", "csv"} {
		api.Set("format", fmtName)
		u := template.URL(d.cfg.Base + "/v1/activity/export?" + api.Encode())
		if fmtName == "csv" {
			v.ExportCSV = u
		} else {
			v.ExportJSONL = u
		}
	}
	chart, err := d.activityChart(r.Context(), ns, f)
	if err != nil {
		return nil, err
	}
	v.Chart = chart
	if c, ok := activity.ParseCursor(q.Get("before")); ok {
		f.Before = c
	}
	recs, next, err := d.activity.List(r.Context(), ns, f, activityPageSize)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		v.Rows = append(v.Rows, activityRow{Record: rec, When: rec.At.UTC().Format("2006-01-02 15:04:05 UTC"),
			AtISO: rec.At.UTC().Format(time.RFC3339Nano), Latency: latency(rec.Latency), EventText: eventTexts[rec.Event]})
	}
	if next.ID != "" {
		nq := url.Values{}
		for k, vals := range q {
			nq[k] = vals
		}
		nq.Set("before", next.String())
		v.NextURL = d.cfg.Base + "/activity?" + nq.Encode()
	}
	return v, nil
}

// latency is a duration as the page shows it.
func latency(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < 10*time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}
