package controlplane

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/pairing/pairwire"
)

// pinEvent is a tool pin event as a gateway reports it.
func pinEvent(at time.Time, event, tool, by string) pairwire.Activity {
	decision, reason := pairwire.DecisionDeny, "MCP_TOOL_CHANGED"
	if event == pairwire.EventToolAccepted || event == pairwire.EventToolPinned {
		decision, reason = pairwire.DecisionAllow, ""
	}
	return pairwire.Activity{At: at.Format(time.RFC3339Nano), AgentName: by, Connection: "docs", Service: "docs", Protocol: "mcp",
		Tool: tool, Decision: decision, Reason: reason, Event: event}
}

// TestActivityToolPinEvents: a gateway's tool pin events are records of
// the owner's activity, listed with their event and shown on the page.
// They carry no agent key, yet are never folded into the counts of
// refusals before a signature verified, nor bounded with unsigned
// records: no stranger chose them.
func TestActivityToolPinEvents(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e = newEnv(t, e.st, func(c *Config) {
			c.Activity = ActivityConfig{MaxUnsignedPerNamespace: 1}
			c.Auth = AuthConfig{Origins: []string{testOrigin}}
		})
		s := e.seed(map[string]any{"namespaces": []string{"alice"}})
		tok := s.Sessions["alice"]
		g := e.pairedGateway(tok)
		at := time.Now().Add(-time.Minute)
		batch := pairwire.ActivityBatch{Records: []pairwire.Activity{
			pinEvent(at, pairwire.EventToolChanged, "docs.publish", ""),
			pinEvent(at.Add(time.Millisecond), pairwire.EventToolNew, "docs.wipe", ""),
			pinEvent(at.Add(2*time.Millisecond), pairwire.EventToolRejected, "docs.publish", "owner"),
		}}
		e.report(g.id, batch).want(t, http.StatusOK, "")
		r := e.do("GET", "/v1/activity", nil, withSession(tok)).want(t, http.StatusOK, "")
		body := string(r.body)
		for _, want := range []string{`"event":"tool_changed"`, `"event":"tool_new"`, `"event":"tool_rejected"`, `"agent_name":"owner"`} {
			if !strings.Contains(body, want) {
				t.Errorf("the listing lacks %s: %s", want, body)
			}
		}
		if l := e.activity(tok, ""); len(l.Activity) != 3 {
			t.Fatalf("%d of 3 events kept", len(l.Activity))
		}
		if u := string(e.do("GET", "/v1/activity/unverified", nil, withSession(tok)).want(t, http.StatusOK, "").body); strings.Contains(u, "MCP_TOOL_CHANGED") {
			t.Errorf("an event was folded into the unverified counts: %s", u)
		}
		page := string(e.do("GET", "/activity", nil, withSession(tok)).want(t, http.StatusOK, "").body)
		for _, want := range []string{"tool definition rejected; kept hidden", "tool definition changed; hidden until reviewed", "new tool; hidden until reviewed", "docs.wipe"} {
			if !strings.Contains(page, want) {
				t.Errorf("/activity lacks %q", want)
			}
		}
		csv := string(e.do("GET", "/v1/activity/export?format=csv", nil, withSession(tok)).want(t, http.StatusOK, "").body)
		if !strings.HasSuffix(strings.SplitN(csv, "\n", 2)[0], ",event") || !strings.Contains(csv, ",tool_rejected") {
			t.Errorf("CSV export: %s", csv)
		}

		for name, mod := range map[string]func(*pairwire.Activity){
			"attack: an event with an agent key":  func(a *pairwire.Activity) { a.AgentKey = "ed25519:key0" },
			"attack: an event with a method":      func(a *pairwire.Activity) { a.Method = "tools/call" },
			"attack: an event of no tool":         func(a *pairwire.Activity) { a.Tool = "" },
			"attack: an event of its own naming":  func(a *pairwire.Activity) { a.Event = "claim_approved" },
			"attack: an event of an http request": func(a *pairwire.Activity) { a.Protocol = "http" },
		} {
			t.Run(name, func(t *testing.T) {
				a := pinEvent(at, pairwire.EventToolAccepted, "docs.publish", "owner")
				mod(&a)
				e.report(g.id, pairwire.ActivityBatch{Records: []pairwire.Activity{a}}).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
			})
		}
	})
}
