package controlplane

import (
	"github.com/idnhq/idn/controlplane/internal/dashboard"
	"html"
	"regexp"
	"strings"
	"testing"
)

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
		for range dashboard.PageSize + 10 {
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
		if strings.Join(ids, ",") != strings.Join(slack[:dashboard.PageSize], ",") || links["prev"] != "" ||
			links["next"] != "/claims?after="+slack[dashboard.PageSize-1]+"&service=slack&status=approved" {
			t.Fatalf("first page: %d rows, links %v", len(ids), links)
		}
		ids, links = view(links["next"])
		if strings.Join(ids, ",") != strings.Join(slack[dashboard.PageSize:], ",") || links["next"] != "" ||
			links["prev"] != "/claims?before="+slack[dashboard.PageSize]+"&service=slack&status=approved" {
			t.Fatalf("second page: %d rows, links %v", len(ids), links)
		}
		ids, links = view(links["prev"])
		if strings.Join(ids, ",") != strings.Join(slack[:dashboard.PageSize], ",") || links["prev"] != "" {
			t.Fatalf("back to the first page: %d rows, links %v", len(ids), links)
		}
		if ids, _ := view("/claims?status=approved&service=slack&after=clm_gone"); strings.Join(ids, ",") != strings.Join(slack[:dashboard.PageSize], ",") {
			t.Fatalf("an unknown cursor shows %d rows, want the first page", len(ids))
		}
	})
}
