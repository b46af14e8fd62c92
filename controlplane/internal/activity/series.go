package activity

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/pairing/pairwire"
)

// Series is a selection's decisions counted in consecutive steps of equal
// length: the allowed ones together, the denied ones by reason.
type Series struct {
	// Start is the first bucket's start, a whole number of Steps since
	// the Unix epoch.
	Start time.Time
	Step  time.Duration
	// Buckets run from Start, one per Step; empty when nothing matched.
	Buckets []Bucket
}

// Bucket is one step's count.
type Bucket struct {
	Allowed int64
	// Denied counts refusals by reason ("" when the gateway gave none);
	// nil when there were none.
	Denied map[string]int64
}

// seriesSteps are the steps a Series may take, the shortest that keeps
// the buckets within the caller's bound chosen. Each divides a day or is
// a whole number of days, so buckets start on the hour or at midnight UTC.
var seriesSteps = []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
	2 * 24 * time.Hour, 7 * 24 * time.Hour}

// minSeriesSpan is the shortest span a Series covers when its filter
// sets no start.
const minSeriesSpan = time.Hour

// Series counts the records of ns that f selects (f.Before aside) in at
// most limit buckets (more only past seriesSteps' longest). They cover
// f.Since, or the oldest record selected (an hour before the end at
// least), to f.Until, or now (or the newest record if it is later).
func (a *Activity) Series(ctx context.Context, ns string, f Filter, limit int) (Series, error) {
	f.Before = Cursor{}
	args := []any{ns}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	where := ` FROM activity WHERE namespace = $1` + f.where(arg)
	var oldest, newest sql.NullInt64
	// Two subqueries: each bound alone can be read off the index's end.
	bounds := `SELECT (SELECT MIN(at)` + where + `), (SELECT MAX(at)` + where + `)`
	if err := a.deps.DB.QueryRowContext(ctx, bounds, args...).Scan(&oldest, &newest); err != nil {
		return Series{}, sqldb.Err("bound activity series", err)
	}
	if !oldest.Valid {
		return Series{}, nil
	}
	from, to := oldest.Int64, max(sqldb.Micros(a.kit.Now()), newest.Int64+1)
	if !f.Since.IsZero() {
		from = sqldb.Micros(f.Since)
	} else {
		// Records of the last minutes alone would fill the chart with a
		// bar or two: they are shown within the last hour at least.
		from = min(from, to-minSeriesSpan.Microseconds())
	}
	if !f.Until.IsZero() {
		to = sqldb.Micros(f.Until)
	}
	if to <= from {
		return Series{}, nil
	}
	var start, step, n int64
	for _, s := range seriesSteps {
		step = s.Microseconds()
		start = from - ((from%step)+step)%step
		if n = (to - start + step - 1) / step; n <= int64(limit) {
			break
		}
	}
	out := Series{Start: sqldb.FromMicros(start), Step: time.Duration(step) * time.Microsecond, Buckets: make([]Bucket, n)}

	rows, err := a.deps.DB.QueryContext(ctx, `SELECT (at - `+arg(start)+`) / `+arg(step)+`, decision, reason, COUNT(*)`+
		where+` GROUP BY 1, 2, 3`, args...)
	if err != nil {
		return Series{}, sqldb.Err("count activity series", err)
	}
	defer rows.Close()
	for rows.Next() {
		var i, count int64
		var decision, reason string
		if err := rows.Scan(&i, &decision, &reason, &count); err != nil {
			return Series{}, sqldb.Err("scan activity series", err)
		}
		if i < 0 || i >= n {
			continue // a bound of f and the buckets disagree; never expected
		}
		b := &out.Buckets[i]
		if decision == pairwire.DecisionAllow {
			b.Allowed += count
			continue
		}
		if b.Denied == nil {
			b.Denied = map[string]int64{}
		}
		b.Denied[reason] += count
	}
	return out, sqldb.Err("count activity series", rows.Err())
}
