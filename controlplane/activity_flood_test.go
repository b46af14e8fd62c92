package controlplane

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/pairing/pairwire"
)

// unverifiedList is GET /v1/activity/unverified as a test reads it.
type unverifiedList struct {
	Unverified []struct {
		Minute    string `json:"minute"`
		GatewayID string `json:"gateway_id"`
		Protocol  string `json:"protocol"`
		Reason    string `json:"reason"`
		Count     int64  `json:"count"`
	} `json:"unverified"`
}

func (e *env) unverified(tok, query string) unverifiedList {
	e.t.Helper()
	r := e.do("GET", "/v1/activity/unverified"+query, nil, withSession(tok)).want(e.t, http.StatusOK, "")
	var l unverifiedList
	if err := json.Unmarshal(r.body, &l); err != nil {
		e.t.Fatal(err)
	}
	return l
}

// TestActivityUnsignedNoise (issue 37, finding 3): what strangers cause
// is counted, never stored a record each, and records with no verified
// agent are bounded apart from the signed ones, so no flood of them
// evicts an agent's record.
func TestActivityUnsignedNoise(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e = newEnv(t, e.st, func(c *Config) {
			c.Activity = ActivityConfig{MaxPerNamespace: 10, MaxUnsignedPerNamespace: 5, Retention: 48 * time.Hour,
				UnsignedRetention: 24 * time.Hour}
		})
		s := e.seed(map[string]any{"namespaces": []string{"alice", "mallory"}})
		alice, mallory := s.Sessions["alice"], s.Sessions["mallory"]
		g := e.pairedGateway(alice)
		e.pairedGateway(mallory)
		now := time.Now()
		genuine := decisions(now.Add(-time.Hour), 10)
		e.report(g.id, pairwire.ActivityBatch{Records: genuine}).want(t, http.StatusOK, "")

		t.Run("attack: unsigned development-bypass records past their bound", func(t *testing.T) {
			bypass := decisions(now.Add(-time.Minute), 500)
			for i := range bypass {
				bypass[i].AgentName, bypass[i].AgentKey = "", ""
				bypass[i].Decision, bypass[i].Reason, bypass[i].Status = pairwire.DecisionAllow, "", 200
			}
			for range 3 {
				e.report(g.id, pairwire.ActivityBatch{Records: bypass}).want(t, http.StatusOK, "")
			}
			l := e.activity(alice, "?limit=200")
			signed, unsigned := 0, 0
			for _, r := range l.Activity {
				if r.AgentKey == "" {
					unsigned++
				} else {
					signed++
				}
			}
			if signed != 10 || unsigned != 5 {
				t.Errorf("after 1,500 unsigned records, %d signed (want all 10) and %d unsigned (want the bound 5) kept", signed, unsigned)
			}
		})
		t.Run("attack: refusals before a signature reported as records", func(t *testing.T) {
			// A gateway that predates counting sends each refusal, with the
			// connection id its sender chose.
			flood := decisions(now.Add(-30*time.Second), 500)
			for i := range flood {
				flood[i].AgentName, flood[i].AgentKey, flood[i].Connection = "", "", "chosen-by-sender"
				flood[i].Decision, flood[i].Reason, flood[i].Status = pairwire.DecisionDeny, "AUTH_HEADERS_INVALID", 403
			}
			r := e.report(g.id, pairwire.ActivityBatch{Records: flood}).want(t, http.StatusOK, "")
			if !strings.Contains(string(r.body), `"accepted":0`) {
				t.Errorf("refusals were stored as records: %s", r.body)
			}
			if l := e.activity(alice, "?connection=chosen-by-sender"); len(l.Activity) != 0 {
				t.Errorf("%d records name the sender's connection", len(l.Activity))
			}
		})
		t.Run("counted refusals reach their owner only", func(t *testing.T) {
			e.report(g.id, pairwire.ActivityBatch{Records: []pairwire.Activity{}, Unverified: []pairwire.UnverifiedCount{
				{At: now.Add(-30 * time.Second).Format(time.RFC3339Nano), Protocol: "http", Reason: "AUTH_HEADERS_INVALID", Count: 19_500},
				{At: now.Add(-30 * time.Second).Format(time.RFC3339Nano), Protocol: "mcp", Reason: "AUTH_SIGNATURE_INVALID", Count: 7},
			}}).want(t, http.StatusOK, "")
			got := map[string]int64{}
			for _, c := range e.unverified(alice, "").Unverified {
				if c.GatewayID != g.ready.GatewayID || c.Minute == "" {
					t.Errorf("count %+v", c)
				}
				got[c.Protocol+" "+c.Reason] += c.Count
			}
			if got["http AUTH_HEADERS_INVALID"] != 20_000 || got["mcp AUTH_SIGNATURE_INVALID"] != 7 || len(got) != 2 {
				t.Errorf("counts %v, want 20,000 (500 folded, 19,500 counted) and 7", got)
			}
			if l := e.unverified(mallory, ""); len(l.Unverified) != 0 {
				t.Errorf("another owner reads %+v", l.Unverified)
			}
			if l := e.activity(alice, "?limit=200&agent="+genuine[0].AgentKey); len(l.Activity) != 5 {
				t.Errorf("the flood left %d of bot-0's 5 records", len(l.Activity))
			}
		})
		t.Run("attack: counts a gateway could grow without bound", func(t *testing.T) {
			at := now.Format(time.RFC3339Nano)
			for name, c := range map[string]pairwire.UnverifiedCount{
				"free-text reason":  {At: at, Protocol: "http", Reason: "connection chosen-by-sender", Count: 1},
				"unknown protocol":  {At: at, Protocol: "gopher", Reason: "AUTH_HEADERS_INVALID", Count: 1},
				"negative count":    {At: at, Protocol: "http", Reason: "AUTH_HEADERS_INVALID", Count: -5},
				"time not RFC 3339": {At: "yesterday", Protocol: "http", Reason: "AUTH_HEADERS_INVALID", Count: 1},
			} {
				t.Run(name, func(t *testing.T) {
					e.report(g.id, pairwire.ActivityBatch{Records: []pairwire.Activity{}, Unverified: []pairwire.UnverifiedCount{c}}).
						want(t, http.StatusBadRequest, "VALIDATION_ERROR")
				})
			}
			many := make([]pairwire.UnverifiedCount, pairwire.MaxUnverifiedCounts+1)
			for i := range many {
				many[i] = pairwire.UnverifiedCount{At: at, Protocol: "http", Reason: "AUTH_HEADERS_INVALID", Count: 1}
			}
			e.report(g.id, pairwire.ActivityBatch{Records: []pairwire.Activity{}, Unverified: many}).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
		})
		t.Run("counts and unsigned records go first, signed ones keep their retention", func(t *testing.T) {
			e.offset.Store(int64(25 * time.Hour))
			if err := e.srv.maintain(t.Context()); err != nil {
				t.Fatal(err)
			}
			if l := e.unverified(alice, ""); len(l.Unverified) != 0 {
				t.Errorf("%d counts outlived the unsigned retention", len(l.Unverified))
			}
			signed := 0
			for _, r := range e.activity(alice, "?limit=200").Activity {
				if r.AgentKey == "" {
					t.Errorf("an unsigned record outlived its retention: %+v", r)
				} else {
					signed++
				}
			}
			if signed != 10 {
				t.Errorf("%d of 10 signed records kept within their retention", signed)
			}
		})
	})
}
