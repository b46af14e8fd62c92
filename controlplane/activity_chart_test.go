package controlplane

import (
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/pairing/pairwire"
)

// spreadDecisions are n records, one every 30 s from at: every third a
// refusal whose reason cycles through reasons, the others allowed, the
// fifth ones through connection "docs", the rest through "github".
func spreadDecisions(at time.Time, n int, reasons []string) []pairwire.Activity {
	out := make([]pairwire.Activity, n)
	for i := range out {
		d, reason, status, conn := pairwire.DecisionAllow, "", 200, "github"
		if i%3 == 0 {
			d, reason, status = pairwire.DecisionDeny, reasons[(i/3)%len(reasons)], 403
		}
		if i%5 == 0 {
			conn = "docs"
		}
		out[i] = pairwire.Activity{At: at.Add(time.Duration(i) * 30 * time.Second).Format(time.RFC3339Nano),
			AgentName: "bot", AgentKey: "ed25519:key", Connection: conn, Service: conn,
			Protocol: "http", Method: "GET", Route: "/repos/{id}", Decision: d, Reason: reason, Status: status, LatencyMS: 1}
	}
	return out
}

// chartTotals reads the chart's table: each row's last cell (its total)
// summed, and the column headers.
func chartTotals(t *testing.T, page string) (sum, rows int, headers []string) {
	t.Helper()
	start := strings.Index(page, `id="activity-chart"`)
	if start < 0 {
		t.Fatal("the page has no chart")
	}
	chart := page[start : start+strings.Index(page[start:], "</section>")]
	for _, m := range regexp.MustCompile(`<td>(\d+)</td></tr>`).FindAllStringSubmatch(chart, -1) {
		n, _ := strconv.Atoi(m[1])
		sum, rows = sum+n, rows+1
	}
	for _, m := range regexp.MustCompile(`<th scope="col">([^<]*)</th>`).FindAllStringSubmatch(chart, -1) {
		headers = append(headers, m[1])
	}
	return sum, rows, headers
}

// TestActivityChart: the Activity page's chart counts the whole selection
// the table pages through, by decision and denial reason, under the
// table's filters, in steps that fit its time range.
func TestActivityChart(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		tok := e.seed(map[string]any{"namespaces": []string{"alice"}}).Sessions["alice"]
		g := e.pairedGateway(tok)
		reasons := []string{"AUTH_CLAIM_REQUIRED", "AUTH_CLAIM_REQUIRED", "AUTH_CLAIM_REQUIRED", "AUTH_SIGNATURE_INVALID",
			"AUTH_SIGNATURE_INVALID", "AUTH_CLAIM_REVOKED", "RATE_LIMITED", "AUTH_NONCE_REPLAYED"}
		// 90 records over the last 45 minutes: 60 allowed, 30 denied.
		e.report(g.id, pairwire.ActivityBatch{Records: spreadDecisions(time.Now().Add(-45*time.Minute), 90, reasons)}).want(t, http.StatusOK, "")
		page := func(q string) string {
			return string(e.do("GET", "/activity"+q, nil, withSession(tok)).want(t, http.StatusOK, "").body)
		}

		p := page("?range=1h")
		sum, rows, headers := chartTotals(t, p)
		if sum != 90 || rows < 20 {
			t.Errorf("the last hour's chart counts %d calls in %d steps, want 90 in at least 20 (the table shows 50 a page)", sum, rows)
		}
		want := []string{"Time (UTC)", "Allowed", "Denied: AUTH_CLAIM_REQUIRED", "Denied: AUTH_SIGNATURE_INVALID", "Denied: AUTH_CLAIM_REVOKED",
			"Denied, other reasons", "Total"}
		if fmt.Sprint(headers) != fmt.Sprint(want) {
			t.Errorf("the chart's columns %q, want %q", headers, want)
		}
		for _, s := range []string{"90 calls from ", ": 60 allowed, 30 denied.", "Each bar is 2 minutes.", "Allowed <span class=\"muted\">(60)</span>",
			"Denied: AUTH_CLAIM_REQUIRED <span class=\"muted\">(12)</span>", "Denied, other reasons <span class=\"muted\">(6)</span>"} {
			if !strings.Contains(p, s) {
				t.Errorf("the last hour's chart lacks %q", s)
			}
		}
		if got := strings.Count(p, "<g data-bar>"); got != rows {
			t.Errorf("%d bars drawn for %d steps with calls", got, rows)
		}

		for _, c := range []struct {
			query, step string
			sum         int
		}{
			{"?decision=deny&range=1h", "2 minutes", 30},
			{"?connection=docs&range=24h", "30 minutes", 18},
			{"?connection=docs&decision=deny&range=7d", "3 hours", 6},
			{"?before=1.act_x", "2 minutes", 90}, // everything kept: the last hour at least; a page's cursor changes nothing
		} {
			p := page(c.query)
			if sum, _, _ := chartTotals(t, p); sum != c.sum {
				t.Errorf("%s: the chart counts %d calls, want %d", c.query, sum, c.sum)
			}
			if !strings.Contains(p, "Each bar is "+c.step+".") {
				t.Errorf("%s: the bars are not %s long", c.query, c.step)
			}
		}
		if p := page("?connection=slack"); strings.Contains(p, `id="activity-chart"`) {
			t.Error("an empty selection draws a chart")
		}
	})
}

// BenchmarkActivityPage serves the Activity page of a namespace holding
// 100,000 records over the last 30 days (one in five denied, for four
// reasons), in process, and reports its p50 in ms: the chart counts the
// whole selection on every page, the table shows 50 records.
func BenchmarkActivityPage(b *testing.B) {
	for _, engine := range engines {
		b.Run(engine, func(b *testing.B) {
			st := openStore(b, storeConfig(b, engine))
			srv, err := New(Config{Store: st, JWTSecret: testSecret})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := srv.Provision(b.Context(), "acme", ServiceSpec{Slug: "acme-api", Name: "API", Endpoint: "https://api.example"}); err != nil {
				b.Fatal(err)
			}
			tok, _, err := srv.IssueSession(b.Context(), "acme")
			if err != nil {
				b.Fatal(err)
			}
			populateActivity(b, st, "acme", 100_000)
			for _, q := range []string{"", "?range=24h", "?range=1h", "?decision=deny", "?connection=docs&range=7d"} {
				b.Run("page"+q, func(b *testing.B) {
					var ds []time.Duration
					for b.Loop() {
						start := time.Now()
						req := httptest.NewRequest("GET", "/activity"+q, nil)
						req.AddCookie(&http.Cookie{Name: SessionCookie, Value: tok})
						w := httptest.NewRecorder()
						srv.ServeHTTP(w, req)
						if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `id="activity-chart"`) {
							b.Fatalf("GET /activity%s: %d %.300s", q, w.Code, w.Body)
						}
						ds = append(ds, time.Since(start))
					}
					b.ReportMetric(percentile(ds, 50), "p50_ms")
				})
			}
		})
	}
}

// populateActivity stores n records of ns spread over the last 30 days,
// straight into the table.
func populateActivity(b *testing.B, st *Store, ns string, n int) {
	b.Helper()
	reasons := []string{"AUTH_CLAIM_REQUIRED", "AUTH_SIGNATURE_INVALID", "RATE_LIMITED", "AUTH_CLAIM_REVOKED"}
	now := time.Now()
	err := st.db.Tx(b.Context(), func(tx *sql.Tx) error {
		for i := range n {
			decision, reason, conn := "allow", "", "github"
			if i%5 == 0 {
				decision, reason = "deny", reasons[i/5%len(reasons)]
			}
			if i%7 == 0 {
				conn = "docs"
			}
			at := now.Add(-time.Duration(i) * (30 * 24 * time.Hour / time.Duration(n))).UnixMicro()
			if _, err := tx.ExecContext(b.Context(), `INSERT INTO activity (namespace, id, gateway_id, at, agent_name, agent_key,
				connection_id, service, protocol, method, route, tool, decision, reason, status, latency_us)
				VALUES ($1, $2, 'gw_1', $3, 'bot', 'ed25519:k', $4, $4, 'http', 'GET', '/x', '', $5, $6, 200, 1000)`,
				ns, fmt.Sprintf("act_%08d", i), at, conn, decision, reason); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(b.Context(), `INSERT INTO activity_counts (namespace, n) VALUES ($1, $2)`, ns, n)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}
