package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idnhq/idn/controlplane/internal/activity"
)

// The Activity page's chart: the selection's decisions over time, drawn
// by the server as SVG stacked bars (no script), with a legend and the
// same counts as a table for screen readers and anyone who prefers one.

// chartBuckets is the most bars a chart draws: at a phone's 390 px each
// bar keeps about 5 px.
const chartBuckets = 60

// chartReasons is how many denial reasons get a series of their own; the
// rest share one.
const chartReasons = 3

// chart is what the template draws.
type chart struct {
	// Summary says in a sentence what the chart shows.
	Summary string
	// Step names the buckets' length, as in "5-minute steps".
	Step     string
	Series   []chartSeries
	Bars     []chartBar
	Width    int // of the SVG's view box
	Max      int64
	From, To string
	// Rows are the buckets with calls, for the table.
	Rows []chartRow
}

type chartSeries struct {
	Name, Class string
	Total       int64
}

type chartBar struct {
	Title    string
	X        int
	Segments []chartSegment
}

type chartSegment struct {
	Class string
	Y, H  float64
}

type chartRow struct {
	When   string
	Counts []int64
	Total  int64
}

// chartHeight is the SVG view box's height; the bars scale to it.
const chartHeight = 100

// activityChart counts f's selection and lays the chart out; nil when
// nothing matched.
func (d *Dashboard) activityChart(ctx context.Context, ns string, f activity.Filter) (*chart, error) {
	s, err := d.activity.Series(ctx, ns, f, chartBuckets)
	if err != nil || len(s.Buckets) == 0 {
		return nil, err
	}
	// The series: allowed, the commonest reasons, then the rest.
	var allowed int64
	byReason := map[string]int64{}
	for _, b := range s.Buckets {
		allowed += b.Allowed
		for r, n := range b.Denied {
			byReason[r] += n
		}
	}
	reasons := slices.SortedFunc(maps.Keys(byReason), func(a, b string) int {
		return cmp.Or(cmp.Compare(byReason[b], byReason[a]), cmp.Compare(a, b))
	})
	// An empty Allowed series stays, drawn in no bar: its colour keeps
	// its meaning whatever the filters.
	series := []chartSeries{{Name: "Allowed", Class: "series0", Total: allowed}}
	index := map[string]int{}
	for i, r := range reasons {
		if i == chartReasons && len(reasons) > chartReasons+1 {
			series = append(series, chartSeries{Name: "Denied, other reasons", Class: fmt.Sprintf("series%d", len(series))})
			for _, r := range reasons[i:] {
				index[r] = len(series) - 1
				series[len(series)-1].Total += byReason[r]
			}
			break
		}
		name := "Denied: " + r
		if r == "" {
			name = "Denied, no reason given"
		}
		index[r] = len(series)
		series = append(series, chartSeries{Name: name, Class: fmt.Sprintf("series%d", len(series)), Total: byReason[r]})
	}

	c := &chart{Series: series, Width: len(s.Buckets) * 10, Step: stepName(s.Step)}
	counts := make([][]int64, len(s.Buckets))
	for i, b := range s.Buckets {
		counts[i] = make([]int64, len(series))
		counts[i][0] = b.Allowed
		for r, n := range b.Denied {
			counts[i][index[r]] += n
		}
		var total int64
		for _, n := range counts[i] {
			total += n
		}
		c.Max = max(c.Max, total)
	}
	layout := chartTimeLayout(s.Step)
	for i := range s.Buckets {
		at := s.Start.Add(time.Duration(i) * s.Step)
		when := at.Format(layout) + "–" + at.Add(s.Step).Format(endLayout(at, s.Step, layout))
		var total int64
		bar := chartBar{X: i * 10}
		y := float64(chartHeight)
		var parts []string
		for j, n := range counts[i] {
			total += n
			if n == 0 {
				continue
			}
			h := float64(n) / float64(c.Max) * chartHeight
			y -= h
			bar.Segments = append(bar.Segments, chartSegment{Class: series[j].Class, Y: y, H: h})
			parts = append(parts, fmt.Sprintf("%s %d", strings.ToLower(series[j].Name), n))
		}
		if total == 0 {
			continue
		}
		bar.Title = when + ": " + strings.Join(parts, ", ")
		c.Bars = append(c.Bars, bar)
		c.Rows = append(c.Rows, chartRow{When: when, Counts: counts[i], Total: total})
	}
	end := s.Start.Add(time.Duration(len(s.Buckets)) * s.Step)
	c.From, c.To = s.Start.Format(layout), end.Format(layout)+" UTC"
	var sum int64
	for _, se := range series {
		sum += se.Total
	}
	c.Summary = fmt.Sprintf("%s from %s to %s: %d allowed, %d denied.", plural(sum, "call"), c.From, c.To, allowed, sum-allowed)
	return c, nil
}

// chartTimeLayout is how the chart names a time, to the step's precision.
func chartTimeLayout(step time.Duration) string {
	if step >= 24*time.Hour {
		return "Jan 2"
	}
	return "Jan 2 15:04"
}

// endLayout is how the chart names the end of the step starting at at:
// its time alone when the step ends on the day it starts.
func endLayout(at time.Time, step time.Duration, layout string) string {
	if step < 24*time.Hour && at.Add(step).YearDay() == at.YearDay() {
		return "15:04"
	}
	return layout
}

// stepName is a step's length in words.
func stepName(step time.Duration) string {
	switch {
	case step%(24*time.Hour) == 0:
		return plural(int64(step/(24*time.Hour)), "day")
	case step%time.Hour == 0:
		return plural(int64(step/time.Hour), "hour")
	}
	return plural(int64(step/time.Minute), "minute")
}

// plural is n and noun, in the plural unless n is one.
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
