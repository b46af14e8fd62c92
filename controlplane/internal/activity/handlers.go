package activity

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/pairing/pairwire"
)

var errNotPaired = apierror.Coded(errcode.GatewayNotPaired, "")

// report stores a paired gateway's batch in its owner's namespace.
func (a *Activity) report(w http.ResponseWriter, r *http.Request) {
	caller, ok := a.deps.Signed.Verify(w, r)
	if !ok {
		return
	}
	gatewayID, ns, paired, err := a.deps.Paired(r.Context(), caller.Namespace, caller.PublicKey)
	if err != nil {
		a.kit.Error(w, r, err)
		return
	}
	if !paired {
		apierror.Write(w, r, errNotPaired)
		return
	}
	if !a.deps.Signed.RecordNonce(w, r, caller) || !a.deps.Signed.ReadBody(w, r, caller) {
		return
	}
	var batch pairwire.ActivityBatch
	if ae := a.kit.Decode(w, r, &batch); ae != nil {
		apierror.Write(w, r, ae)
		return
	}
	if len(batch.Records) > pairwire.MaxActivityBatch {
		apierror.Write(w, r, web.Validation("a batch carries at most %d records", pairwire.MaxActivityBatch))
		return
	}
	now := a.kit.Now()
	recs := make([]Record, 0, len(batch.Records))
	var folded []Unverified
	accounts := map[accountKey]accountState{}
	for i, in := range batch.Records {
		rec, keep, problem := a.admit(in, now)
		switch {
		case problem != "":
			apierror.Write(w, r, web.Validation("records[%d]: %s", i, problem))
			return
		case keep && rec.unsigned() && rec.Decision == pairwire.DecisionDeny:
			folded = fold(folded, rec)
		case keep:
			recs = append(recs, rec)
			if rec.OAuthAccount {
				k := accountKey{rec.Connection, rec.Account}
				switch {
				case rec.Decision == pairwire.DecisionAllow:
					accounts[k] = accountState{}
				case in.AccountNeedsReconnecting && !accounts[k].refused: // the first refusal tells when
					accounts[k] = accountState{refused: true, service: rec.Service, at: rec.At}
				}
			}
		}
	}
	if len(batch.Unverified) > pairwire.MaxUnverifiedCounts {
		apierror.Write(w, r, web.Validation("a batch carries at most %d unverified counts", pairwire.MaxUnverifiedCounts))
		return
	}
	counts := folded
	for i, in := range batch.Unverified {
		c, keep, problem := a.admitUnverified(in, now)
		if problem != "" {
			apierror.Write(w, r, web.Validation("unverified[%d]: %s", i, problem))
			return
		}
		if keep {
			counts = append(counts, c)
		}
	}
	if err := a.store.insert(r.Context(), ns, gatewayID, recs, counts, a.cfg.MaxPerNamespace, a.cfg.MaxUnsignedPerNamespace); err != nil {
		a.kit.Error(w, r, err)
		return
	}
	a.tellAccounts(r.Context(), ns, gatewayID, accounts)
	if batch.Dropped > 0 {
		a.kit.Log.WarnContext(r.Context(), "gateway dropped activity records: its queue was full", "gateway", gatewayID, "dropped", batch.Dropped)
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]int{"accepted": len(recs)})
}

// Field bounds of a reported record.
var fieldLimits = []struct {
	name string
	max  int
	get  func(*pairwire.Activity) string
}{
	{"agent_name", 128, func(a *pairwire.Activity) string { return a.AgentName }},
	{"agent_key", 128, func(a *pairwire.Activity) string { return a.AgentKey }},
	{"connection", 64, func(a *pairwire.Activity) string { return a.Connection }},
	{"service", 128, func(a *pairwire.Activity) string { return a.Service }},
	{"method", 32, func(a *pairwire.Activity) string { return a.Method }},
	{"route", 512, func(a *pairwire.Activity) string { return a.Route }},
	{"tool", 128, func(a *pairwire.Activity) string { return a.Tool }},
	{"reason", 64, func(a *pairwire.Activity) string { return a.Reason }},
	{"event", 32, func(a *pairwire.Activity) string { return a.Event }},
}

// events are the Events a gateway may report.
var events = map[string]bool{pairwire.EventToolPinned: true, pairwire.EventToolChanged: true, pairwire.EventToolNew: true,
	pairwire.EventToolAccepted: true, pairwire.EventToolRejected: true}

// admit checks one reported record. A record older than the retention is
// not kept; one from the future is dated now.
func (a *Activity) admit(in pairwire.Activity, now time.Time) (rec Record, keep bool, problem string) {
	at, err := time.Parse(time.RFC3339Nano, in.At)
	if err != nil {
		return rec, false, "at is not an RFC 3339 time"
	}
	for _, f := range fieldLimits {
		v := f.get(&in)
		if len(v) > f.max || !utf8.ValidString(v) || strings.ContainsFunc(v, isControl) {
			return rec, false, f.name + " is too long or not printable text"
		}
	}
	switch {
	case in.Protocol != "http" && in.Protocol != "mcp":
		return rec, false, `protocol must be "http" or "mcp"`
	case in.Decision != pairwire.DecisionAllow && in.Decision != pairwire.DecisionDeny:
		return rec, false, `decision must be "allow" or "deny"`
	case in.Event != "" && (!events[in.Event] || in.Protocol != "mcp" || in.Tool == "" || in.AgentKey != "" || in.Method != ""):
		return rec, false, "event must be a tool pin event of an mcp tool, with no agent key and no method"
	case in.Event == "" && in.Method == "" || in.Connection == "":
		return rec, false, "method and connection are required"
	case in.Status < 0 || in.Status > 999:
		return rec, false, "status must be 0 to 999"
	case in.LatencyMS < 0 || in.LatencyMS > 24*3600*1000:
		return rec, false, "latency_ms must be 0 to a day"
	case strings.Contains(in.Route, "?"):
		return rec, false, "route must not carry a query"
	case in.Account != nil && (len(*in.Account) > 256 || !utf8.ValidString(*in.Account) || strings.ContainsFunc(*in.Account, isControl)):
		return rec, false, "account is too long or not printable text"
	}
	if at.Before(now.Add(-a.cfg.Retention)) {
		return rec, false, ""
	}
	if at.After(now) {
		at = now
	}
	return Record{ID: sqldb.NewID("act_"), At: at.UTC(), AgentName: in.AgentName, AgentKey: in.AgentKey,
		Connection: in.Connection, Service: in.Service, Protocol: in.Protocol, Method: in.Method, Route: in.Route,
		Tool: in.Tool, Decision: in.Decision, Reason: in.Reason, Status: in.Status,
		Latency: time.Duration(in.LatencyMS * float64(time.Millisecond)), OAuthAccount: in.Account != nil, Account: deref(in.Account), Event: in.Event}, true, ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// fold counts a refusal that a gateway reported as a record although no
// signature verified (as gateways did before they counted them): its
// sender chose its connection and route, so only its reason is kept.
func fold(counts []Unverified, rec Record) []Unverified {
	u := Unverified{Minute: rec.At.Truncate(time.Minute), Protocol: rec.Protocol, Reason: rec.Reason, Count: 1}
	if !codeLike(u.Reason) {
		u.Reason = "OTHER"
	}
	for i, c := range counts {
		if c.Minute.Equal(u.Minute) && c.Protocol == u.Protocol && c.Reason == u.Reason {
			counts[i].Count++
			return counts
		}
	}
	return append(counts, u)
}

// admitUnverified checks one count of refusals before a signature
// verified. The reason must read as an error code, so a gateway reports
// a bounded set of them; a count older than the unsigned retention is
// not kept, and one from the future is dated now.
func (a *Activity) admitUnverified(in pairwire.UnverifiedCount, now time.Time) (c Unverified, keep bool, problem string) {
	at, err := time.Parse(time.RFC3339Nano, in.At)
	switch {
	case err != nil:
		return c, false, "at is not an RFC 3339 time"
	case in.Protocol != "http" && in.Protocol != "mcp":
		return c, false, `protocol must be "http" or "mcp"`
	case !codeLike(in.Reason):
		return c, false, "reason must be an error code (A to Z, 0 to 9 and _, at most 64)"
	case in.Count < 1 || in.Count > 1<<40:
		return c, false, "count must be positive"
	}
	if at.Before(now.Add(-a.cfg.UnsignedRetention)) {
		return c, false, ""
	}
	if at.After(now) {
		at = now
	}
	return Unverified{Minute: at.UTC().Truncate(time.Minute), Protocol: in.Protocol, Reason: in.Reason, Count: in.Count}, true, ""
}

// codeLike: an upper-case letter, then upper-case letters, digits or
// '_', at most 64 in all.
func codeLike(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// recordJSON is a record as the API shows it.
type recordJSON struct {
	ID         string  `json:"id"`
	At         string  `json:"at"`
	GatewayID  string  `json:"gateway_id"`
	AgentName  string  `json:"agent_name"`
	AgentKey   string  `json:"agent_key"`
	Connection string  `json:"connection"`
	Service    string  `json:"service"`
	Protocol   string  `json:"protocol"`
	Method     string  `json:"method"`
	Route      string  `json:"route"`
	Tool       string  `json:"tool"`
	Decision   string  `json:"decision"`
	Reason     string  `json:"reason"`
	Status     int     `json:"status"`
	LatencyMS  float64 `json:"latency_ms"`
	// Account is present for a call through an OAuth account: its
	// subject, "" for the connection's one account.
	Account *string `json:"account,omitempty"`
	Event   string  `json:"event,omitempty"`
}

func toJSON(r Record) recordJSON {
	return recordJSON{ID: r.ID, At: web.Timestamp(r.At), GatewayID: r.GatewayID, AgentName: r.AgentName, AgentKey: r.AgentKey,
		Connection: r.Connection, Service: r.Service, Protocol: r.Protocol, Method: r.Method, Route: r.Route, Tool: r.Tool,
		Decision: r.Decision, Reason: r.Reason, Status: r.Status, LatencyMS: float64(r.Latency.Microseconds()) / 1000,
		Account: accountOf(r), Event: r.Event}
}

func accountOf(r Record) *string {
	if !r.OAuthAccount {
		return nil
	}
	return &r.Account
}

// Page sizes of GET /v1/activity.
const (
	defaultLimit = 50
	maxLimit     = 200
)

// ParseFilter reads a listing's filters from a query: agent, connection,
// service, decision, since and until (RFC 3339), before (a cursor). The dashboard
// reads its page's query with it too.
func ParseFilter(q url.Values) (Filter, error) {
	f := Filter{Agent: q.Get("agent"), Connection: q.Get("connection"), Service: q.Get("service"), Decision: q.Get("decision")}
	if f.Decision != "" && f.Decision != pairwire.DecisionAllow && f.Decision != pairwire.DecisionDeny {
		return f, web.Validation(`decision must be "allow" or "deny"`)
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, web.Validation("%s is not an RFC 3339 time", t.name)
			}
			*t.dst = at
		}
	}
	if v := q.Get("before"); v != "" {
		c, ok := ParseCursor(v)
		if !ok {
			return f, web.Validation("before is not a cursor of this listing")
		}
		f.Before = c
	}
	return f, nil
}

// String is the cursor as the query parameter before carries it.
func (c Cursor) String() string {
	if c.ID == "" {
		return ""
	}
	return strconv.FormatInt(c.At, 10) + "." + c.ID
}

// ParseCursor reads a Cursor.String.
func ParseCursor(s string) (Cursor, bool) {
	at, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || !strings.HasPrefix(id, "act_") || len(id) > 64 {
		return Cursor{}, false
	}
	return Cursor{At: n, ID: id}, true
}

func (a *Activity) listJSON(w http.ResponseWriter, r *http.Request, ns string) {
	f, err := ParseFilter(r.URL.Query())
	if err != nil {
		a.kit.Error(w, r, err)
		return
	}
	limit := defaultLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			apierror.Write(w, r, web.Validation("limit must be 1 to %d", maxLimit))
			return
		}
		limit = n
	}
	recs, next, err := a.List(r.Context(), ns, f, limit)
	if err != nil {
		a.kit.Error(w, r, err)
		return
	}
	out := struct {
		Activity []recordJSON `json:"activity"`
		Next     string       `json:"next,omitempty"`
	}{Activity: make([]recordJSON, len(recs)), Next: next.String()}
	for i, rec := range recs {
		out.Activity[i] = toJSON(rec)
	}
	apierror.WriteJSON(w, http.StatusOK, out)
}

// Page sizes of GET /v1/activity/unverified.
const (
	defaultUnverifiedLimit = 100
	maxUnverifiedLimit     = 1000
)

// unverifiedJSON is a count as the API shows it.
type unverifiedJSON struct {
	Minute    string `json:"minute"`
	GatewayID string `json:"gateway_id"`
	Protocol  string `json:"protocol"`
	Reason    string `json:"reason"`
	Count     int64  `json:"count"`
}

// listUnverified answers the counts of requests refused before a
// signature verified, newest minute first; a client pages on by asking
// again with until set to the oldest minute it has read.
func (a *Activity) listUnverified(w http.ResponseWriter, r *http.Request, ns string) {
	f, err := ParseFilter(url.Values{"since": {r.URL.Query().Get("since")}, "until": {r.URL.Query().Get("until")}})
	if err != nil {
		a.kit.Error(w, r, err)
		return
	}
	limit := defaultUnverifiedLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxUnverifiedLimit {
			apierror.Write(w, r, web.Validation("limit must be 1 to %d", maxUnverifiedLimit))
			return
		}
		limit = n
	}
	counts, err := a.store.listUnverified(r.Context(), ns, f.Since, f.Until, limit)
	if err != nil {
		a.kit.Error(w, r, err)
		return
	}
	out := struct {
		Unverified []unverifiedJSON `json:"unverified"`
	}{Unverified: make([]unverifiedJSON, len(counts))}
	for i, c := range counts {
		out.Unverified[i] = unverifiedJSON{Minute: web.Timestamp(c.Minute), GatewayID: c.GatewayID, Protocol: c.Protocol,
			Reason: c.Reason, Count: c.Count}
	}
	apierror.WriteJSON(w, http.StatusOK, out)
}

// exportPage is how many records one read of an export fetches.
const exportPage = 1000

var csvHeader = []string{"id", "at", "gateway_id", "agent_name", "agent_key", "connection", "service", "protocol", "method",
	"route", "tool", "decision", "reason", "status", "latency_ms", "account", "event"}

// export streams the selection, newest first, as JSON Lines or CSV.
func (a *Activity) export(w http.ResponseWriter, r *http.Request, ns string) {
	f, err := ParseFilter(r.URL.Query())
	if err != nil {
		a.kit.Error(w, r, err)
		return
	}
	format := r.URL.Query().Get("format")
	var contentType, ext string
	switch format {
	case "", "jsonl":
		contentType, ext = "application/jsonl; charset=utf-8", "jsonl"
	case "csv":
		contentType, ext = "text/csv; charset=utf-8", "csv"
	default:
		apierror.Write(w, r, web.Validation(`format must be "jsonl" or "csv"`))
		return
	}
	recs, next, err := a.List(r.Context(), ns, f, exportPage)
	if err != nil {
		a.kit.Error(w, r, err)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Disposition", `attachment; filename="activity.`+ext+`"`)
	w.Header().Set("Cache-Control", "no-store")
	bw := bufio.NewWriter(w)
	cw := csv.NewWriter(bw)
	enc := json.NewEncoder(bw)
	if ext == "csv" {
		cw.Write(csvHeader)
	}
	for {
		for _, rec := range recs {
			j := toJSON(rec)
			if ext == "csv" {
				cw.Write(csvRow(j))
			} else if enc.Encode(j) != nil {
				return
			}
		}
		cw.Flush()
		if cw.Error() != nil || bw.Flush() != nil || next.ID == "" {
			return
		}
		f.Before = next
		if recs, next, err = a.List(r.Context(), ns, f, exportPage); err != nil {
			// The status is sent: the export ends short, and the log says why.
			a.kit.Log.ErrorContext(r.Context(), "activity export ended early", "err", err)
			return
		}
	}
}

// csvRow is a record's CSV row. A cell that a spreadsheet would read as a
// formula (an agent names itself) is prefixed with an apostrophe.
func csvRow(j recordJSON) []string {
	row := []string{j.ID, j.At, j.GatewayID, j.AgentName, j.AgentKey, j.Connection, j.Service, j.Protocol, j.Method,
		j.Route, j.Tool, j.Decision, j.Reason, strconv.Itoa(j.Status), strconv.FormatFloat(j.LatencyMS, 'f', -1, 64), deref(j.Account), j.Event}
	for i, v := range row {
		if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
			row[i] = "'" + v
		}
	}
	return row
}
