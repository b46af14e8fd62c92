package controlplane

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing/pairwire"
)

// activityRecord is a record as the API lists it.
type activityRecord struct {
	ID         string  `json:"id"`
	At         string  `json:"at"`
	GatewayID  string  `json:"gateway_id"`
	AgentName  string  `json:"agent_name"`
	AgentKey   string  `json:"agent_key"`
	Connection string  `json:"connection"`
	Route      string  `json:"route"`
	Decision   string  `json:"decision"`
	LatencyMS  float64 `json:"latency_ms"`
}

type activityList struct {
	Activity []activityRecord `json:"activity"`
	Next     string           `json:"next"`
}

// report posts records as the gateway g, signed by its own key.
func (e *env) report(id *identity.Identity, batch pairwire.ActivityBatch) resp {
	e.t.Helper()
	return e.do("POST", pairwire.ActivityPath, batch, signedBy(id, identity.SignOptions{}))
}

func (e *env) activity(tok, query string) activityList {
	e.t.Helper()
	r := e.do("GET", "/v1/activity"+query, nil, withSession(tok)).want(e.t, http.StatusOK, "")
	var l activityList
	if err := json.Unmarshal(r.body, &l); err != nil {
		e.t.Fatal(err)
	}
	return l
}

// decisions are n records, one a millisecond apart from at, alternating
// allow and deny, the i-th by agent "bot-<i%2>".
func decisions(at time.Time, n int) []pairwire.Activity {
	out := make([]pairwire.Activity, n)
	for i := range out {
		d, reason, status := pairwire.DecisionAllow, "", 200
		if i%2 == 1 {
			d, reason, status = pairwire.DecisionDeny, "AUTH_CLAIM_REQUIRED", 403
		}
		out[i] = pairwire.Activity{At: at.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano),
			AgentName: fmt.Sprintf("bot-%d", i%2), AgentKey: "ed25519:key" + fmt.Sprint(i%2), Connection: "github", Service: "github",
			Protocol: "http", Method: "GET", Route: "/repos/{id}", Decision: d, Reason: reason, Status: status, LatencyMS: 1.5}
	}
	return out
}

func TestActivity(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		s := e.seed(map[string]any{"namespaces": []string{"alice", "mallory"}})
		alice, mallory := s.Sessions["alice"], s.Sessions["mallory"]
		g := e.pairedGateway(alice)
		now := time.Now()
		r := e.report(g.id, pairwire.ActivityBatch{Records: decisions(now.Add(-time.Minute), 5)}).want(t, http.StatusOK, "")
		if !strings.Contains(string(r.body), `"accepted":5`) {
			t.Fatalf("report answered %s", r.body)
		}

		all := e.activity(alice, "")
		if len(all.Activity) != 5 || all.Next != "" {
			t.Fatalf("listing %+v", all)
		}
		first := all.Activity[0]
		if first.Route != "/repos/{id}" || first.GatewayID != g.ready.GatewayID || first.AgentName != "bot-0" || first.LatencyMS != 1.5 {
			t.Errorf("newest record %+v", first)
		}
		if got := e.activity(mallory, ""); len(got.Activity) != 0 {
			t.Errorf("another owner sees %d records", len(got.Activity))
		}
		for _, c := range []struct {
			query string
			want  int
		}{
			{"?decision=deny", 2},
			{"?agent=bot-0", 3},
			{"?agent=ed25519:key1", 2},
			{"?connection=github&decision=allow", 3},
			{"?connection=slack", 0},
			{"?service=github&decision=deny", 2},
			{"?service=slack", 0},
			{"?since=" + now.Add(-time.Minute).Add(2*time.Millisecond).UTC().Format(time.RFC3339Nano), 3},
			{"?until=" + now.Add(-time.Minute).Add(2*time.Millisecond).UTC().Format(time.RFC3339Nano), 2},
		} {
			if got := e.activity(alice, c.query); len(got.Activity) != c.want {
				t.Errorf("%s: %d records, want %d", c.query, len(got.Activity), c.want)
			}
		}
		// Keyset pages: 2, 2, 1, newest first, no record twice.
		seen := map[string]bool{}
		var last string
		for page, q := 0, "?limit=2"; ; page++ {
			l := e.activity(alice, q)
			for _, rec := range l.Activity {
				if seen[rec.ID] || (last != "" && rec.At > last) {
					t.Fatalf("page %d: %s out of order or repeated", page, rec.ID)
				}
				seen[rec.ID], last = true, rec.At
			}
			if l.Next == "" {
				break
			}
			q = "?limit=2&before=" + l.Next
		}
		if len(seen) != 5 {
			t.Errorf("pages held %d records, want 5", len(seen))
		}
		e.do("GET", "/v1/activity?decision=maybe", nil, withSession(alice)).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
		e.do("GET", "/v1/activity", nil).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")

		// Exports: every selected record, as JSON Lines and as CSV.
		r = e.do("GET", "/v1/activity/export?decision=deny", nil, withSession(alice)).want(t, http.StatusOK, "")
		if lines := strings.Split(strings.TrimSpace(string(r.body)), "\n"); len(lines) != 2 || !strings.Contains(lines[0], `"decision":"deny"`) {
			t.Errorf("JSON Lines export %q", r.body)
		}
		if !strings.HasPrefix(r.header.Get("Content-Disposition"), "attachment") {
			t.Errorf("export Content-Disposition %q", r.header.Get("Content-Disposition"))
		}
		r = e.do("GET", "/v1/activity/export?format=csv", nil, withSession(alice)).want(t, http.StatusOK, "")
		rows, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
		if err != nil || len(rows) != 6 || rows[0][0] != "id" || rows[1][9] != "/repos/{id}" {
			t.Errorf("CSV export %q: %v", r.body, err)
		}
	})
}

// TestActivityAgentFilter: the agent filter finds a part of the name
// whatever its case, and a LIKE wildcard in it (% or _) matches only
// itself; a key matches whole.
func TestActivityAgentFilter(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		s := e.seed(map[string]any{"namespaces": []string{"alice"}})
		alice := s.Sessions["alice"]
		g := e.pairedGateway(alice)
		recs := decisions(time.Now().Add(-time.Minute), 5)
		for i, name := range []string{"Invoice bot", "invoice-bot-2", "100%_sure", "Weather bot", `back\slash`} {
			recs[i].AgentName, recs[i].AgentKey = name, fmt.Sprintf("ed25519:key%d", i)
		}
		e.report(g.id, pairwire.ActivityBatch{Records: recs}).want(t, http.StatusOK, "")
		for _, c := range []struct {
			agent string
			want  int
		}{
			{"Invoice", 2},
			{"INVOICE BOT", 1},
			{"bot", 3},
			{"%", 1},
			{"_", 1},
			{`\`, 1},
			{"ed25519:key3", 1},
			{"key3", 0},
			{"nobody", 0},
		} {
			if got := e.activity(alice, "?agent="+url.QueryEscape(c.agent)); len(got.Activity) != c.want {
				t.Errorf("agent=%q: %d records, want %d", c.agent, len(got.Activity), c.want)
			}
		}
	})
}

// TestActivityAttacks: what a gateway, its owner or a stranger may try
// against another owner's activity.
func TestActivityAttacks(t *testing.T) {
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	s := e.seed(map[string]any{"namespaces": []string{"alice", "mallory"}})
	alice, mallory := s.Sessions["alice"], s.Sessions["mallory"]
	e.pairedGateway(alice)
	evil := e.pairedGateway(mallory)
	at := time.Now().Add(-time.Second)

	t.Run("gateway writes into another owner's namespace", func(t *testing.T) {
		body := map[string]any{"namespace": "alice", "records": decisions(at, 1)}
		e.do("POST", pairwire.ActivityPath, body, signedBy(evil.id, identity.SignOptions{})).want(t, http.StatusOK, "")
		if got := e.activity(alice, ""); len(got.Activity) != 0 {
			t.Fatalf("mallory's gateway wrote %d records into alice's activity", len(got.Activity))
		}
		if got := e.activity(mallory, ""); len(got.Activity) != 1 {
			t.Fatalf("mallory's own activity has %d records, want 1", len(got.Activity))
		}
	})
	t.Run("unpaired key reports", func(t *testing.T) {
		e.report(newAgent(t, "gw-host"), pairwire.ActivityBatch{Records: decisions(at, 1)}).want(t, http.StatusForbidden, "GATEWAY_NOT_PAIRED")
	})
	t.Run("unsigned report", func(t *testing.T) {
		e.do("POST", pairwire.ActivityPath, pairwire.ActivityBatch{Records: decisions(at, 1)}).want(t, http.StatusForbidden, "")
	})
	t.Run("replayed report", func(t *testing.T) {
		var sig http.Header
		capture := func(r *http.Request) {
			if err := evil.id.Sign(r, identity.SignOptions{}); err != nil {
				t.Fatal(err)
			}
			sig = r.Header.Clone()
		}
		batch := pairwire.ActivityBatch{Records: decisions(at, 1)}
		e.do("POST", pairwire.ActivityPath, batch, capture).want(t, http.StatusOK, "")
		replay := func(r *http.Request) {
			for k, v := range sig {
				r.Header[k] = v
			}
		}
		e.do("POST", pairwire.ActivityPath, batch, replay).want(t, http.StatusForbidden, "AUTH_REPLAY_DETECTED")
	})
	t.Run("oversized batch", func(t *testing.T) {
		e.report(evil.id, pairwire.ActivityBatch{Records: decisions(at, pairwire.MaxActivityBatch+1)}).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
	})
	t.Run("route carrying a query", func(t *testing.T) {
		recs := decisions(at, 1)
		recs[0].Route = "/search?token=secret"
		e.report(evil.id, pairwire.ActivityBatch{Records: recs}).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
	})
	t.Run("control characters in an agent name", func(t *testing.T) {
		recs := decisions(at, 1)
		recs[0].AgentName = "bot\n2026-01-01 admin logged in"
		e.report(evil.id, pairwire.ActivityBatch{Records: recs}).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
	})
	t.Run("agent name as a spreadsheet formula", func(t *testing.T) {
		recs := decisions(at, 1)
		recs[0].AgentName = `=HYPERLINK("https://evil.example")`
		e.report(evil.id, pairwire.ActivityBatch{Records: recs}).want(t, http.StatusOK, "")
		r := e.do("GET", "/v1/activity/export?format=csv&agent="+strings.ReplaceAll(recs[0].AgentName, `"`, "%22"), nil, withSession(mallory))
		r.want(t, http.StatusOK, "")
		if !strings.Contains(string(r.body), `'=HYPERLINK`) {
			t.Errorf("CSV export does not neutralise a formula: %s", r.body)
		}
	})
	t.Run("future dates", func(t *testing.T) {
		recs := decisions(time.Now().Add(24*time.Hour), 1)
		recs[0].Connection = "future"
		e.report(evil.id, pairwire.ActivityBatch{Records: recs}).want(t, http.StatusOK, "")
		l := e.activity(mallory, "?connection=future")
		if len(l.Activity) != 1 || l.Activity[0].At > time.Now().UTC().Add(time.Minute).Format(time.RFC3339Nano) {
			t.Errorf("a record from the future is kept as dated %+v", l.Activity)
		}
	})
}

// TestActivityBounds: a namespace keeps at most MaxPerNamespace records,
// the oldest going first, and nothing past the retention.
func TestActivityBounds(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e = newEnv(t, e.st, func(c *Config) { c.Activity = ActivityConfig{MaxPerNamespace: 5, Retention: 48 * time.Hour} })
		s := e.seed(map[string]any{"namespaces": []string{"alice"}})
		tok := s.Sessions["alice"]
		g := e.pairedGateway(tok)
		base := time.Now().Add(-time.Hour)
		e.report(g.id, pairwire.ActivityBatch{Records: decisions(base, 4)}).want(t, http.StatusOK, "")
		e.report(g.id, pairwire.ActivityBatch{Records: decisions(base.Add(time.Second), 4)}).want(t, http.StatusOK, "")
		l := e.activity(tok, "")
		if len(l.Activity) != 5 {
			t.Fatalf("%d records kept, want the bound 5", len(l.Activity))
		}
		if oldest := l.Activity[4].At; oldest < base.Add(3*time.Millisecond).UTC().Format(time.RFC3339Nano) {
			t.Errorf("the oldest kept record is %s: older ones were kept over newer", oldest)
		}
		old := decisions(time.Now().Add(-72*time.Hour), 1)
		if r := e.report(g.id, pairwire.ActivityBatch{Records: old}).want(t, http.StatusOK, ""); !strings.Contains(string(r.body), `"accepted":0`) {
			t.Errorf("a record past the retention was stored: %s", r.body)
		}
		e.offset.Store(int64(49 * time.Hour))
		if err := e.srv.maintain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if l := e.activity(tok, ""); len(l.Activity) != 0 {
			t.Errorf("%d records outlived the retention", len(l.Activity))
		}
		// The count followed the pruning: five new records fit again.
		later := time.Now().Add(49 * time.Hour)
		e.do("POST", pairwire.ActivityPath, pairwire.ActivityBatch{Records: decisions(later.Add(-time.Minute), 5)},
			signedBy(g.id, identity.SignOptions{Created: later})).want(t, http.StatusOK, "")
		if l := e.activity(tok, ""); len(l.Activity) != 5 {
			t.Errorf("after pruning, %d of 5 new records kept", len(l.Activity))
		}
	})
}

// TestActivityPageAndDeletion: the dashboard page lists the owner's
// activity only, and deleting the account deletes it.
func TestActivityPageAndDeletion(t *testing.T) {
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) { c.Auth = AuthConfig{Origins: []string{testOrigin}} })
	tok := sessionOf(t, e.signup("alice", newDevice(t, "EdDSA")).want(t, http.StatusCreated, ""))
	other := e.seed(map[string]any{"namespaces": []string{"mallory"}}).Sessions["mallory"]
	g := e.pairedGateway(tok)
	e.report(g.id, pairwire.ActivityBatch{Records: decisions(time.Now().Add(-time.Minute), 3)}).want(t, http.StatusOK, "")

	page := string(e.do("GET", "/activity?decision=deny", nil, withSession(tok)).want(t, http.StatusOK, "").body)
	for _, want := range []string{`href="/activity" aria-current="page"`, "bot-1", "AUTH_CLAIM_REQUIRED", "/repos/{id}",
		`href="/v1/activity/export?decision=deny&amp;format=csv"`} {
		if !strings.Contains(page, want) {
			t.Errorf("/activity lacks %q", want)
		}
	}
	if strings.Contains(page, "bot-0") {
		t.Error("the deny filter shows an allowed request")
	}
	// A service's page links here with its slug; the page follows it.
	page = string(e.do("GET", "/activity?service=slack", nil, withSession(tok)).want(t, http.StatusOK, "").body)
	if strings.Contains(page, "bot-1") || !strings.Contains(page, `name="service" value="slack"`) ||
		!strings.Contains(page, `href="/v1/activity/export?format=csv&amp;service=slack"`) {
		t.Error("/activity?service=slack shows another service's records or drops the filter")
	}
	if page := string(e.do("GET", "/activity", nil, withSession(other)).want(t, http.StatusOK, "").body); strings.Contains(page, "bot-1") {
		t.Error("another owner's page shows alice's activity")
	}
	if r := e.do("GET", "/activity", nil); !strings.Contains(string(r.body), `data-page="login"`) {
		t.Errorf("/activity without a session is not sent to the login page: %d", r.status)
	}

	e.do("DELETE", "/v1/auth/account", nil, withSession(tok), fromBrowser).want(t, http.StatusOK, "")
	var n int
	if err := e.st.db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM activity WHERE namespace = 'alice'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("after the account's deletion %d activity records are left (%v)", n, err)
	}
}
