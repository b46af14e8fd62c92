package controlplane

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/identity"
)

// claimWorld seeds an owner "acme" with service "github" and returns its
// session and service key.
func claimWorld(e *env) (owner reqOpt, key string) {
	s := e.seed(map[string]any{
		"namespaces": []string{"acme", "bob"},
		"services":   []map[string]string{{"slug": "github", "owner": "acme"}, {"slug": "slack", "owner": "bob"}},
	})
	e.apiKeys = s.APIKeys
	e.sessions = s.Sessions
	return withSession(s.Sessions["acme"]), s.APIKeys["github"]
}

func submitBody(ns, pub, svc string) map[string]any {
	return map[string]any{"namespace": ns, "public_key": pub, "service": svc, "subject": "alice", "agent_id": "a-1", "agent_name": "Build bot"}
}

func TestSubmitClaim(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		_, key := claimWorld(e)
		agent := newAgent(t, "acme")

		c := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(agent), "github"), withKey(key)).want(t, 201, "").json(t)
		id := c["claim_id"].(string)
		if c["status"] != "pending" || c["namespace"] != "acme" || c["service"] != "github" || c["public_key"] != pubKey(agent) ||
			c["agent_ip"] != "127.0.0.1" || c["subject"] != "alice" || c["agent_name"] != "Build bot" || id[:4] != "clm_" {
			t.Fatalf("claim = %v", c)
		}
		if ev := e.events.next(t); ev.Type != EventSubmitted || ev.Claim.ID != id {
			t.Fatalf("event = %+v", ev)
		}

		t.Run("idempotent per tuple", func(t *testing.T) {
			again := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(agent), "github"), withKey(key)).want(t, 200, "").json(t)
			if again["claim_id"] != id {
				t.Fatalf("resubmission made %v, want %s", again["claim_id"], id)
			}
			// The multibase form of the same key is the same tuple.
			mb := submitBody("acme", identity.Multibase(agent.PublicKey), "github")
			if again := e.signed("POST", "/v1/claims", mb, withKey(key)).want(t, 200, "").json(t); again["claim_id"] != id {
				t.Fatalf("multibase resubmission made %v", again["claim_id"])
			}
		})
		t.Run("agent_ip given", func(t *testing.T) {
			b := submitBody("acme", pubKey(newAgent(t, "acme")), "github")
			b["agent_ip"] = "203.0.113.7"
			if c := e.signed("POST", "/v1/claims", b, withKey(key)).want(t, 201, "").json(t); c["agent_ip"] != "203.0.113.7" {
				t.Fatalf("agent_ip = %v", c["agent_ip"])
			}
		})
		t.Run("pending limit 429", func(t *testing.T) {
			// Limit is 3 in this env; two are pending already.
			e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 201, "")
			e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 429, "PENDING_LIMIT_REACHED")
			// An existing tuple is still answered.
			e.signed("POST", "/v1/claims", submitBody("acme", pubKey(agent), "github"), withKey(key)).want(t, 200, "")
		})
		t.Run("errors", func(t *testing.T) {
			pub := pubKey(newAgent(t, "xyz"))
			e.signed("POST", "/v1/claims", submitBody("nobody", pub, "github"), withKey(key)).want(t, 404, "NAMESPACE_NOT_FOUND")
			e.signed("POST", "/v1/claims", submitBody("bob", pub, "slack"), withKey(key)).want(t, 403, "SERVICE_MISMATCH")
			e.signed("POST", "/v1/claims", submitBody("a", pub, "github"), withKey(key)).want(t, 400, "NAMESPACE_INVALID")
			e.signed("POST", "/v1/claims", submitBody("bob", "ed25519:short", "github"), withKey(key)).want(t, 400, "VALIDATION_ERROR")
			b := submitBody("bob", pub, "github")
			b["agent_ip"] = "not-an-ip"
			e.signed("POST", "/v1/claims", b, withKey(key)).want(t, 400, "VALIDATION_ERROR")
			e.signed("POST", "/v1/claims", submitBody("bob", pub, "github")).want(t, 401, "API_KEY_INVALID")
			e.signed("POST", "/v1/claims", submitBody("bob", pub, "github"), withKey("idn_sk_unknown")).want(t, 401, "API_KEY_INVALID")
			e.do("POST", "/v1/claims", submitBody("bob", pub, "github"), withKey(key)).want(t, 403, "AUTH_IDENTITY_INVALID")
			e.seed(map[string]any{"namespaces": []string{"closed"}})
			e.deactivate("closed")
			e.signed("POST", "/v1/claims", submitBody("closed", pub, "github"), withKey(key)).want(t, 403, "NAMESPACE_DEACTIVATED")
		})
	})
}

// TestClaimStateMachine drives every (status, action) pair: the three moves
// of the claim lifecycle (pending → approved, pending → rejected,
// approved → revoked) succeed, and approving a revoked or rejected claim
// approves its tuple under a new claim; every other one is 409.
func TestClaimStateMachine(t *testing.T) {
	t.Parallel()
	allowed := map[[2]string]string{
		{StatusPending, "approve"}:  StatusApproved,
		{StatusPending, "reject"}:   StatusRejected,
		{StatusApproved, "revoke"}:  StatusRevoked,
		{StatusRevoked, "approve"}:  StatusApproved,
		{StatusRejected, "approve"}: StatusApproved,
	}
	forEachEngine(t, func(t *testing.T, e *env) {
		owner, _ := claimWorld(e)
		for _, from := range []string{StatusPending, StatusApproved, StatusRejected, StatusRevoked, StatusExpired} {
			for _, action := range []string{"approve", "reject", "revoke"} {
				t.Run(action+" "+from, func(t *testing.T) {
					s := e.seed(map[string]any{"claims": []map[string]string{{"namespace": "acme", "service": "github",
						"public_key": pubKey(newAgent(t, "acme")), "status": from}}})
					id := s.Claims[0].ClaimID
					e.drainEvents()
					r := e.do("POST", "/v1/claims/"+id+"/"+action, nil, owner)
					to, ok := allowed[[2]string{from, action}]
					if !ok {
						r.want(t, 409, "CLAIM_STATE_CONFLICT")
						return
					}
					c := r.want(t, 200, "").json(t)
					if c["status"] != to {
						t.Fatalf("status = %v, want %s", c["status"], to)
					}
					if from == StatusRevoked || from == StatusRejected {
						// A new claim; the old one stays as it was.
						if c["claim_id"] == id || c["public_key"] != s.Claims[0].PublicKey || latestStatus(t, e.st, "acme", s.Claims[0].PublicKey, "github") != StatusApproved {
							t.Fatalf("approved again as %v", c)
						}
						id = c["claim_id"].(string)
					}
					if ev := e.events.next(t); ev.Type != "request."+to || ev.Claim.ID != id {
						t.Fatalf("event = %+v", ev)
					}
				})
			}
		}
		t.Run("errors", func(t *testing.T) {
			s := e.seed(map[string]any{"claims": []map[string]string{{"namespace": "acme", "service": "github",
				"public_key": pubKey(newAgent(t, "acme")), "status": "pending"}}})
			id := s.Claims[0].ClaimID
			e.do("POST", "/v1/claims/"+id+"/approve", nil).want(t, 401, "ADMIN_UNAUTHORIZED")
			e.do("POST", "/v1/claims/"+id+"/approve", nil, withSession(e.sessions["bob"])).want(t, 404, "CLAIM_NOT_FOUND")
			e.do("POST", "/v1/claims/clm_missing/approve", nil, owner).want(t, 404, "CLAIM_NOT_FOUND")
			e.do("POST", "/v1/claims/"+id+"/promote", nil, owner).want(t, 404, "NOT_FOUND")
			e.do("POST", "/v1/claims/"+id+"/approve", nil, owner, withHeader("Origin", "https://evil.example")).want(t, 403, "ORIGIN_FORBIDDEN")
		})
	})
}

// TestConcurrentTransitions races approve against revoke, and approve
// against reject, on one claim: the end state is always one the state
// machine can reach, and an approval always leaves the tuple approved
// (approving a rejected claim approves its tuple under a new claim).
func TestConcurrentTransitions(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		owner, _ := claimWorld(e)
		for round := 0; round < 10; round++ {
			for _, pair := range [][2]string{{"approve", "revoke"}, {"approve", "reject"}} {
				s := e.seed(map[string]any{"claims": []map[string]string{{"namespace": "acme", "service": "github",
					"public_key": pubKey(newAgent(t, "acme")), "status": "pending"}}})
				id := s.Claims[0].ClaimID
				codes := make([]int, 2)
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i, action := range pair {
					wg.Go(func() {
						<-start
						codes[i] = e.do("POST", "/v1/claims/"+id+"/"+action, nil, owner).status
					})
				}
				close(start)
				wg.Wait()
				var final string
				e.st.db.QueryRowContext(context.Background(), `SELECT status FROM claims WHERE id = $1`, id).Scan(&final)
				switch pair[1] {
				case "revoke":
					ok := (codes[0] == 200 && codes[1] == 200 && final == StatusRevoked) ||
						(codes[0] == 200 && codes[1] == 409 && final == StatusApproved)
					if !ok {
						t.Fatalf("approve %d, revoke %d, final %s", codes[0], codes[1], final)
					}
				case "reject":
					// An approval that comes second approves the rejected
					// claim's tuple under a new claim, as it would in turn.
					ok := (codes[0] == 200 && codes[1] == 409 && final == StatusApproved) ||
						(codes[0] == 200 && codes[1] == 200 && final == StatusRejected &&
							latestStatus(t, e.st, "acme", s.Claims[0].PublicKey, "github") == StatusApproved)
					if !ok {
						t.Fatalf("approve %d, reject %d, final %s", codes[0], codes[1], final)
					}
				}
			}
		}
	})
}

func TestPendingExpiry(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		owner, key := claimWorld(e)
		old := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 201, "").json(t)
		e.offset.Store(int64(23 * time.Hour))
		fresh := e.do("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key),
			signedBy(e.agent, identity.SignOptions{Created: e.srv.now()})).want(t, 201, "").json(t)
		e.offset.Store(int64(24*time.Hour + time.Minute))

		// Past the expiry the claim cannot be approved, even before the job runs.
		e.do("POST", "/v1/claims/"+old["claim_id"].(string)+"/approve", nil, owner).want(t, 409, "CLAIM_STATE_CONFLICT")
		if err := e.srv.maintain(t.Context()); err != nil {
			t.Fatal(err)
		}
		list := e.do("GET", "/v1/namespaces/acme/claims?status=expired", nil, owner).want(t, 200, "").json(t)["claims"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["claim_id"] != old["claim_id"] || list[0].(map[string]any)["expired_at"] == nil {
			t.Fatalf("expired = %v", list)
		}
		e.do("POST", "/v1/claims/"+fresh["claim_id"].(string)+"/approve", nil, owner).want(t, 200, "")

		// A stale pending claim neither answers a resubmission nor counts
		// against the limit: it is expired and a new claim is made.
		stale := submitBody("acme", pubKey(newAgent(t, "acme")), "github")
		sign := func() reqOpt { return signedBy(e.agent, identity.SignOptions{Created: e.srv.now()}) }
		first := e.do("POST", "/v1/claims", stale, withKey(key), sign()).want(t, 201, "").json(t)
		e.offset.Add(int64(25 * time.Hour))
		second := e.do("POST", "/v1/claims", stale, withKey(key), sign()).want(t, 201, "").json(t)
		if first["claim_id"] == second["claim_id"] {
			t.Fatal("a stale pending claim answered a resubmission")
		}
	})
}

func TestOwnerClaimListing(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		owner, _ := claimWorld(e)
		var claims []map[string]string
		for i := 0; i < 7; i++ {
			status, svc := "approved", "github"
			if i%2 == 1 {
				status = "revoked"
			}
			if i == 6 {
				status, svc = "pending", "slack"
			}
			claims = append(claims, map[string]string{"namespace": "acme", "service": svc, "public_key": pubKey(newAgent(t, "acme")), "status": status})
		}
		e.seed(map[string]any{"claims": claims})

		get := func(q string) ([]any, map[string]any) {
			m := e.do("GET", "/v1/namespaces/acme/claims"+q, nil, owner).want(t, 200, "").json(t)
			return m["claims"].([]any), m["pagination"].(map[string]any)
		}
		all, p := get("")
		if len(all) != 7 || p["total"] != 7.0 || p["limit"] != 50.0 || p["has_more"] != false {
			t.Fatalf("all: %d claims, pagination %v", len(all), p)
		}
		first := all[0].(map[string]any)
		for _, f := range []string{"claim_id", "namespace", "service", "public_key", "agent_ip", "status", "created_at"} {
			if _, ok := first[f]; !ok {
				t.Fatalf("record lacks %s: %v", f, first)
			}
		}
		if got, _ := get("?status=approved"); len(got) != 3 {
			t.Fatalf("approved = %d", len(got))
		}
		if got, _ := get("?status=pending&service=slack"); len(got) != 1 {
			t.Fatalf("pending slack = %d", len(got))
		}
		if got, _ := get("?service=nothing"); len(got) != 0 {
			t.Fatalf("unknown service = %d", len(got))
		}
		// Pages cover everything exactly once.
		seen := map[string]bool{}
		for off := 0; ; off += 3 {
			page, p := get("?limit=3&offset=" + strconv.Itoa(off))
			for _, c := range page {
				seen[c.(map[string]any)["claim_id"].(string)] = true
			}
			if p["has_more"] != (off+3 < 7) {
				t.Fatalf("offset %d: has_more %v", off, p["has_more"])
			}
			if p["has_more"] == false {
				break
			}
		}
		if len(seen) != 7 {
			t.Fatalf("paging saw %d claims", len(seen))
		}

		for _, q := range []string{"?status=bogus", "?limit=0", "?limit=201", "?limit=x", "?offset=-1"} {
			e.do("GET", "/v1/namespaces/acme/claims"+q, nil, owner).want(t, 400, "VALIDATION_ERROR")
		}
		e.do("GET", "/v1/namespaces/acme/claims?limit=200", nil, owner).want(t, 200, "")
		e.do("GET", "/v1/namespaces/acme/claims", nil).want(t, 401, "ADMIN_UNAUTHORIZED")
		e.do("GET", "/v1/namespaces/bob/claims", nil, owner).want(t, 403, "NAMESPACE_FORBIDDEN")
		e.do("GET", "/v1/namespaces/b!/claims", nil, owner).want(t, 400, "NAMESPACE_INVALID")
		e.st.Close()
		e.do("GET", "/v1/namespaces/acme/claims", nil, owner).want(t, 503, "DATABASE_UNAVAILABLE")
	})
}

func TestClaimsFeed(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		owner, key := claimWorld(e)
		var claims []map[string]string
		for i := 0; i < 5; i++ {
			claims = append(claims, map[string]string{"namespace": "acme", "service": "github", "public_key": pubKey(newAgent(t, "acme"))})
		}
		claims = append(claims,
			map[string]string{"namespace": "acme", "service": "github", "public_key": pubKey(newAgent(t, "acme")), "status": "pending"},
			map[string]string{"namespace": "acme", "service": "github", "public_key": pubKey(newAgent(t, "acme")), "status": "revoked"},
			map[string]string{"namespace": "bob", "service": "slack", "public_key": pubKey(newAgent(t, "bob"))})
		e.seed(map[string]any{"claims": claims})

		feed := func(q string, opts ...reqOpt) resp {
			return e.signed("GET", "/v1/namespaces/claims"+q, nil, append([]reqOpt{withKey(key)}, opts...)...)
		}
		r := feed("?service=github").want(t, 200, "")
		m := r.json(t)
		list, p := m["claims"].([]any), m["pagination"].(map[string]any)
		if len(list) != 5 || p["total"] != 5.0 || p["limit"] != 500.0 || p["offset"] != 0.0 || p["has_more"] != false {
			t.Fatalf("feed: %d claims, %v", len(list), p)
		}
		prev := ""
		for _, c := range list {
			c := c.(map[string]any)
			k := c["approved_at"].(string) + c["claim_id"].(string)
			if k < prev || c["service"] != "github" || c["namespace"] != "acme" {
				t.Fatalf("feed out of order or foreign: %v", c)
			}
			prev = k
			if _, err := identity.ParsePublicKey(c["public_key"].(string)); err != nil {
				t.Fatal(err)
			}
		}
		// Without ?service the key's own service is served.
		if n := len(feed("").want(t, 200, "").json(t)["claims"].([]any)); n != 5 {
			t.Fatalf("default service feed has %d", n)
		}
		page := feed("?limit=2&offset=4").want(t, 200, "").json(t)
		if len(page["claims"].([]any)) != 1 || page["pagination"].(map[string]any)["has_more"] != false {
			t.Fatalf("last page = %v", page)
		}
		if feed("?limit=2&offset=2").json(t)["pagination"].(map[string]any)["has_more"] != true {
			t.Fatal("middle page has_more = false")
		}

		t.Run("etag", func(t *testing.T) {
			etag := r.header.Get("ETag")
			if etag == "" {
				t.Fatal("no ETag")
			}
			nm := feed("?service=github", withHeader("If-None-Match", etag)).want(t, 304, "")
			if len(nm.body) != 0 || nm.header.Get("ETag") != etag {
				t.Fatalf("304 body %q etag %q", nm.body, nm.header.Get("ETag"))
			}
			feed("?service=github", withHeader("If-None-Match", `"other", W/`+etag)).want(t, 304, "")
			// An approval changes the page, so the old ETag no longer matches.
			s := e.seed(map[string]any{"claims": []map[string]string{{"namespace": "acme", "service": "github",
				"public_key": pubKey(newAgent(t, "acme")), "status": "pending"}}})
			e.do("POST", "/v1/claims/"+s.Claims[0].ClaimID+"/approve", nil, owner).want(t, 200, "")
			changed := feed("?service=github", withHeader("If-None-Match", etag)).want(t, 200, "")
			if changed.header.Get("ETag") == etag || len(changed.json(t)["claims"].([]any)) != 6 {
				t.Fatal("feed did not change after an approval")
			}
		})
		t.Run("errors", func(t *testing.T) {
			for _, q := range []string{"?limit=0", "?limit=2001", "?limit=abc", "?offset=-1", "?offset=x"} {
				feed(q).want(t, 400, "VALIDATION_ERROR")
			}
			feed("?limit=2000").want(t, 200, "")
			feed("?limit=1").want(t, 200, "")
			feed("?service=slack").want(t, 403, "SERVICE_MISMATCH")
			e.signed("GET", "/v1/namespaces/claims?service=github", nil).want(t, 401, "API_KEY_INVALID")
			e.signed("GET", "/v1/namespaces/claims?service=github", nil, withHeader("Authorization", "Basic "+key)).want(t, 401, "API_KEY_INVALID")
			e.do("GET", "/v1/namespaces/claims?service=github", nil, withKey(key)).want(t, 403, "AUTH_IDENTITY_INVALID")
		})
	})
}

func TestVerifyEndpoint(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		owner, key := claimWorld(e)
		agent := newAgent(t, "acme")
		q := func(pub string) string {
			return fmt.Sprintf("/v1/verify?namespace=acme&service=github&public_key=%s", url.QueryEscape(pub))
		}
		if m := e.signed("GET", q(pubKey(agent)), nil, withKey(key)).want(t, 200, "").json(t); m["authorized"] != false || m["claim_id"] != nil {
			t.Fatalf("unknown key: %v", m)
		}
		c := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(agent), "github"), withKey(key)).want(t, 201, "").json(t)
		id := c["claim_id"].(string)
		if m := e.signed("GET", q(pubKey(agent)), nil, withKey(key)).json(t); m["authorized"] != false || m["status"] != "pending" || m["claim_id"] != id {
			t.Fatalf("pending: %v", m)
		}
		e.do("POST", "/v1/claims/"+id+"/approve", nil, owner).want(t, 200, "")
		m := e.signed("GET", q(identity.Multibase(agent.PublicKey)), nil, withKey(key)).json(t)
		if m["authorized"] != true || m["status"] != "approved" || m["approved_at"] == nil {
			t.Fatalf("approved: %v", m)
		}
		e.do("POST", "/v1/claims/"+id+"/revoke", nil, owner).want(t, 200, "")
		if m := e.signed("GET", q(pubKey(agent)), nil, withKey(key)).json(t); m["authorized"] != false || m["status"] != "revoked" {
			t.Fatalf("revoked: %v", m)
		}
		e.signed("GET", "/v1/verify?namespace=acme&service=slack&public_key="+url.QueryEscape(pubKey(agent)), nil, withKey(key)).want(t, 403, "SERVICE_MISMATCH")
		e.signed("GET", "/v1/verify?namespace=a&public_key="+url.QueryEscape(pubKey(agent)), nil, withKey(key)).want(t, 400, "NAMESPACE_INVALID")
		e.signed("GET", "/v1/verify?namespace=acme&public_key=nope", nil, withKey(key)).want(t, 400, "VALIDATION_ERROR")
		e.signed("GET", q(pubKey(agent)), nil).want(t, 401, "API_KEY_INVALID")
		e.do("GET", q(pubKey(agent)), nil, withKey(key)).want(t, 403, "AUTH_IDENTITY_INVALID")
	})
}

// TestFeedStateAndCursors checks the trigger-kept totals against a real
// count after every kind of change, and that sequential paging (which uses
// remembered cursors) returns exactly what plain offset paging returns.
func TestFeedStateAndCursors(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		owner, key := claimWorld(e)
		var claims []map[string]string
		for i := 0; i < 9; i++ {
			claims = append(claims, map[string]string{"namespace": "acme", "service": "github", "public_key": pubKey(newAgent(t, "acme"))})
		}
		claims = append(claims, map[string]string{"namespace": "acme", "service": "github", "public_key": pubKey(newAgent(t, "acme")), "status": "pending"})
		s := e.seed(map[string]any{"claims": claims})

		readAll := func() ([]string, int64) {
			var ids []string
			var total int64
			for off := 0; ; off += 4 {
				m := e.signed("GET", "/v1/namespaces/claims?limit=4&offset="+strconv.Itoa(off), nil, withKey(key)).want(t, 200, "").json(t)
				for _, c := range m["claims"].([]any) {
					ids = append(ids, c.(map[string]any)["claim_id"].(string))
				}
				p := m["pagination"].(map[string]any)
				total = int64(p["total"].(float64))
				if p["has_more"] == false {
					return ids, total
				}
			}
		}
		check := func(step string) {
			t.Helper()
			var want int64
			e.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM claims WHERE service = 'github' AND status = 'approved'`).Scan(&want)
			// Twice: the second pass runs on remembered cursors.
			for pass := 0; pass < 2; pass++ {
				ids, total := readAll()
				if total != want || int64(len(ids)) != want {
					t.Fatalf("%s pass %d: total %d, read %d, want %d", step, pass, total, len(ids), want)
				}
				rows, err := e.st.db.QueryContext(t.Context(), `SELECT id FROM claims WHERE service = 'github' AND status = 'approved' ORDER BY approved_at, id`)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; rows.Next(); i++ {
					var id string
					rows.Scan(&id)
					if ids[i] != id {
						t.Fatalf("%s pass %d: position %d is %s, the database's order says %s", step, pass, i, ids[i], id)
					}
				}
				rows.Close()
			}
		}
		check("seeded")
		e.do("POST", "/v1/claims/"+s.Claims[9].ClaimID+"/approve", nil, owner).want(t, 200, "")
		check("approved")
		e.do("POST", "/v1/claims/"+s.Claims[2].ClaimID+"/revoke", nil, owner).want(t, 200, "")
		e.do("POST", "/v1/claims/"+s.Claims[5].ClaimID+"/revoke", nil, owner).want(t, 200, "")
		check("revoked")
		if _, err := e.st.db.Exec(context.Background(), `DELETE FROM claims WHERE id = $1`, s.Claims[0].ClaimID); err != nil {
			t.Fatal(err)
		}
		check("deleted")
		var id string
		e.st.db.QueryRowContext(context.Background(), `SELECT id FROM services WHERE slug = 'github'`).Scan(&id)
		e.do("DELETE", "/v1/services/"+id, nil, owner).want(t, 204, "")
		if approved, _ := feedHead(t, e.st, "github"); approved != 0 {
			t.Fatalf("after service deletion: approved %d", approved)
		}
	})
}

// TestConcurrentSubmissionsRespectPendingLimit: parallel submissions of
// different keys to one namespace never exceed the pending limit, and
// parallel submissions of one tuple create one claim.
func TestConcurrentSubmissionsRespectPendingLimit(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		_, key := claimWorld(e)
		one := pubKey(newAgent(t, "acme"))
		var wg sync.WaitGroup
		codes := make([]int, 12)
		start := make(chan struct{})
		for i := range codes {
			pub := one
			if i >= 4 {
				pub = pubKey(newAgent(t, "acme"))
			}
			wg.Go(func() {
				<-start
				codes[i] = e.signed("POST", "/v1/claims", submitBody("acme", pub, "github"), withKey(key)).status
			})
		}
		close(start)
		wg.Wait()
		var pending int
		e.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM claims WHERE namespace = 'acme' AND status = 'pending'`).Scan(&pending)
		var sameTuple int
		e.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM claims WHERE public_key = $1`, one).Scan(&sameTuple)
		created := 0
		for _, c := range codes[:4] {
			if c == 201 {
				created++
			}
		}
		if pending != 3 || sameTuple > 1 || created != sameTuple {
			t.Fatalf("pending %d (limit 3), claims of one tuple %d; codes %v", pending, sameTuple, codes)
		}
		for _, c := range codes {
			if c != 200 && c != 201 && c != 429 {
				t.Fatalf("codes %v", codes)
			}
		}
	})
}

// TestSubmissionRacingACommitRespectsPendingLimit (PostgreSQL, where
// submissions run side by side): a submission that read the pending count
// before another pending claim committed, and so passed the budget check
// made before its insert, is still refused once that claim commits: the
// count it reads after its own increment of the counter is exact.
func TestSubmissionRacingACommitRespectsPendingLimit(t *testing.T) {
	t.Parallel()
	sc := storeConfig(t, ProviderPostgres)
	e := newEnv(t, openStore(t, sc), func(c *Config) { c.MaxPendingClaims = 1 })
	_, key := claimWorld(e)
	ctx := context.Background()
	other, err := sql.Open("pgx", sc.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var holder int
	if err := tx.QueryRow(`SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO claims (id, namespace, public_key, service, agent_ip, agent_net, subject, agent_id, agent_name, status, created_at, updated_at)
		VALUES ('clm_racing', 'acme', $1, 'github', '203.0.113.1', '203.0.113.1', '', '', '', 'pending', $2, $2)`,
		pubKey(newAgent(t, "acme")), sqldb.Micros(time.Now())); err != nil {
		t.Fatal(err)
	}
	done := make(chan resp)
	go func() {
		done <- e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key))
	}()
	// The submission has passed the check before its insert (the racing
	// claim is not committed) once it waits for the counter row.
	for waiting := 0; waiting == 0; {
		if err := other.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, holder).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			t.Fatalf("the submission answered %d before the racing claim committed", r.status)
		default:
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	(<-done).want(t, http.StatusTooManyRequests, "PENDING_LIMIT_REACHED")
	var pending int
	e.st.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM claims WHERE namespace = 'acme' AND status = 'pending'`).Scan(&pending)
	if pending != 1 {
		t.Fatalf("%d pending claims, limit 1", pending)
	}
}
