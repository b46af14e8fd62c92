package controlplane

import (
	"context"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"html"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"
)

// countRows reads q's (key…, n) rows as "key/…" → n, leaving out zeros.
func countRows(t *testing.T, st *Store, q string) map[string]int64 {
	t.Helper()
	rows, err := st.db.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var a, b, c string
		var n int64
		if err := rows.Scan(&a, &b, &c, &n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			out[a+"/"+b+"/"+c] = n
		}
	}
	return out
}

// checkCounts fails unless the counters equal a count of the claims.
func checkCounts(t *testing.T, st *Store, when string) {
	t.Helper()
	for _, c := range []struct{ kept, counted string }{
		{`SELECT namespace, service, status, n FROM claim_counts`,
			`SELECT namespace, service, status, COUNT(*) FROM claims GROUP BY namespace, service, status`},
		{`SELECT namespace, service, agent_net, n FROM pending_agents`,
			`SELECT namespace, service, agent_net, COUNT(*) FROM claims WHERE status = 'pending' GROUP BY namespace, service, agent_net`},
	} {
		kept, counted := countRows(t, st, c.kept), countRows(t, st, c.counted)
		if !maps.Equal(kept, counted) {
			t.Fatalf("%s: counters %v, claims %v", when, kept, counted)
		}
	}
}

// TestClaimCountsFollowEveryChange: the counters that the claims page, the
// listing's total and the pending budgets read are filled in when an
// existing database is upgraded, and then follow every way a claim is
// created, changes status or goes.
func TestClaimCountsFollowEveryChange(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := storeConfig(t, engine)
			now := time.Now()

			// A database of the release before the counters, with claims.
			old := openStoreAt(t, cfg, claimCountsVersion-1)
			db := old.db
			for _, ns := range []string{"acme", "bob"} {
				if err := old.ensureNamespace(ctx, ns, now); err != nil {
					t.Fatal(err)
				}
			}
			for i, status := range []string{"pending", "pending", "pending", "approved", "revoked", "rejected", "expired", "pending"} {
				ns, svc := "acme", []string{"github", "slack"}[i%2]
				if i == 7 {
					ns = "bob"
				}
				if _, err := db.Exec(ctx, `INSERT INTO claims (id, namespace, public_key, service, agent_ip, agent_net, subject, agent_id, agent_name, status, created_at, updated_at)
					VALUES ($1, $2, $3, $4, '192.0.2.1', '192.0.2.1', '', '', '', $5, $6, $6)`,
					fmt.Sprintf("clm_old%d", i), ns, fmt.Sprintf("ed25519:old%d", i), svc, status, sqldb.Micros(now)); err != nil {
					t.Fatal(err)
				}
			}
			old.Close()

			st := openStore(t, cfg)
			checkCounts(t, st, "after the upgrade")

			budget := pendingBudget{perService: 100, perAgent: 100}
			var submitted []Claim
			for i, ip := range []string{"192.0.2.1", "192.0.2.2", "2001:db8::1", ""} {
				c, created, err := st.submitClaim(ctx, Claim{Namespace: "acme", PublicKey: fmt.Sprintf("ed25519:new%d", i), Service: "github", AgentIP: ip},
					budget, now.Add(-time.Hour), now)
				if err != nil || !created {
					t.Fatalf("submit: %v, created %v", err, created)
				}
				submitted = append(submitted, c)
			}
			checkCounts(t, st, "after submissions")
			for _, step := range []struct{ id, action string }{{submitted[0].ID, "approve"}, {submitted[1].ID, "reject"}, {submitted[0].ID, "revoke"}} {
				if _, err := st.transition(ctx, "acme", step.id, step.action, now.Add(-time.Hour), now); err != nil {
					t.Fatalf("%s: %v", step.action, err)
				}
				checkCounts(t, st, "after "+step.action)
			}
			if _, err := st.rejectPending(ctx, "acme", "slack", now.Add(-time.Hour), now); err != nil {
				t.Fatal(err)
			}
			checkCounts(t, st, "after reject-pending")
			if _, err := st.expirePending(ctx, now.Add(time.Second), now); err != nil {
				t.Fatal(err)
			}
			checkCounts(t, st, "after expiry")
			// A stale pending claim expired by a submission of its service.
			if _, _, err := st.submitClaim(ctx, Claim{Namespace: "bob", PublicKey: "ed25519:late", Service: "slack", AgentIP: "192.0.2.9"},
				budget, now.Add(time.Second), now); err != nil {
				t.Fatal(err)
			}
			checkCounts(t, st, "after an expiring submission")
			if _, err := st.db.Exec(context.Background(), `DELETE FROM claims WHERE namespace = 'acme' AND service = 'github'`); err != nil {
				t.Fatal(err)
			}
			checkCounts(t, st, "after deletes")
		})
	}
}

// TestOwnerClaimCursors: the owner listing pages by claim id, forward with
// after= and back with before=, each claim exactly once and in order, even
// while claims change status; the dashboard's pager follows the same
// cursors, labelled.
func TestOwnerClaimCursors(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		owner, _ := claimWorld(e)
		var claims []map[string]string
		for range 7 {
			claims = append(claims, map[string]string{"namespace": "acme", "service": "github", "public_key": pubKey(newAgent(t, "acme")), "status": "approved"})
		}
		e.seed(map[string]any{"claims": claims})
		get := func(q string) ([]string, map[string]any) {
			if !strings.Contains(q, "limit=") {
				q += "&limit=3"
			}
			m := e.do("GET", "/v1/namespaces/acme/claims?status=approved"+q, nil, owner).want(t, 200, "").json(t)
			var ids []string
			for _, c := range m["claims"].([]any) {
				ids = append(ids, c.(map[string]any)["claim_id"].(string))
			}
			return ids, m["pagination"].(map[string]any)
		}
		var all []string
		first, p := get("")
		if _, ok := p["prev_before"]; ok {
			t.Fatalf("first page has prev_before: %v", p)
		}
		var pages [][]string
		for ids := first; ; {
			pages = append(pages, ids)
			all = append(all, ids...)
			if p["has_more"] != true {
				if _, ok := p["next_after"]; ok {
					t.Fatalf("last page has next_after: %v", p)
				}
				break
			}
			if len(pages) == 1 {
				// A claim of the next page leaves the status: paging does not skip.
				listing, _ := get("&limit=50")
				e.do("POST", "/v1/claims/"+listing[4]+"/revoke", nil, owner).want(t, 200, "")
			}
			ids, p = get("&after=" + p["next_after"].(string))
		}
		ordered, _ := get("&limit=50")
		if strings.Join(all, ",") != strings.Join(ordered, ",") || len(pages) != 2 {
			t.Fatalf("pages %v, want the listing %v in pages of 3", pages, ordered)
		}
		back, bp := get("&before=" + pages[1][0])
		if strings.Join(back, ",") != strings.Join(pages[0], ",") || bp["total"] != 6.0 {
			t.Fatalf("before the second page: %v (%v), want %v", back, bp, pages[0])
		}
		for _, q := range []string{"&after=clm_nope", "&before=clm_nope", "&after=" + all[0] + "&offset=3", "&after=" + all[0] + "&before=" + all[1]} {
			e.do("GET", "/v1/namespaces/acme/claims?limit=3"+q, nil, owner).want(t, 400, "VALIDATION_ERROR")
		}

		// The dashboard's pager links to the same cursors.
		var more []map[string]string
		for range claimsPageSize + 10 {
			more = append(more, map[string]string{"namespace": "acme", "service": "slack", "public_key": pubKey(newAgent(t, "acme")), "status": "approved"})
		}
		e.seed(map[string]any{"claims": more})
		slack := func(q string) []string {
			m := e.do("GET", "/v1/namespaces/acme/claims?status=approved&service=slack&limit=200"+q, nil, owner).want(t, 200, "").json(t)
			var ids []string
			for _, c := range m["claims"].([]any) {
				ids = append(ids, c.(map[string]any)["claim_id"].(string))
			}
			return ids
		}("")
		rows := regexp.MustCompile(`<tr data-id="([^"]+)"`)
		link := regexp.MustCompile(`<a href="([^"]+)" rel="(prev|next)">(Previous|Next) page</a>`)
		view := func(path string) (ids []string, links map[string]string) {
			body := string(e.do("GET", path, nil, owner).want(t, 200, "").body)
			for _, m := range rows.FindAllStringSubmatch(body, -1) {
				ids = append(ids, m[1])
			}
			links = map[string]string{}
			for _, m := range link.FindAllStringSubmatch(body, -1) {
				links[m[2]] = html.UnescapeString(m[1])
			}
			if len(links) > 0 && !strings.Contains(body, `<nav class="pager" aria-label="Pages">`) {
				t.Fatalf("%s: pager without its label", path)
			}
			return ids, links
		}
		ids, links := view("/claims?status=approved&service=slack")
		if strings.Join(ids, ",") != strings.Join(slack[:claimsPageSize], ",") || links["prev"] != "" ||
			links["next"] != "/claims?after="+slack[claimsPageSize-1]+"&service=slack&status=approved" {
			t.Fatalf("first page: %d rows, links %v", len(ids), links)
		}
		ids, links = view(links["next"])
		if strings.Join(ids, ",") != strings.Join(slack[claimsPageSize:], ",") || links["next"] != "" ||
			links["prev"] != "/claims?before="+slack[claimsPageSize]+"&service=slack&status=approved" {
			t.Fatalf("second page: %d rows, links %v", len(ids), links)
		}
		ids, links = view(links["prev"])
		if strings.Join(ids, ",") != strings.Join(slack[:claimsPageSize], ",") || links["prev"] != "" {
			t.Fatalf("back to the first page: %d rows, links %v", len(ids), links)
		}
		if ids, _ := view("/claims?status=approved&service=slack&after=clm_gone"); strings.Join(ids, ",") != strings.Join(slack[:claimsPageSize], ",") {
			t.Fatalf("an unknown cursor shows %d rows, want the first page", len(ids))
		}
	})
}
