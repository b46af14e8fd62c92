package ownerauth

import (
	"context"
	"database/sql"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/idnhq/idn/apierror"
)

// sessionStart describes how a session began: the passkey that started it
// ("" for sessions issued without a ceremony) and a coarse description of
// the client, which its owner sees in GET /v1/auth/sessions.
type sessionStart struct {
	passkeyID  string
	userAgent  string
	clientAddr string
}

// maxUserAgent bounds the stored User-Agent; it only helps an owner tell
// sessions apart.
const maxUserAgent = 200

// startOf describes the client of r. The address is kept only as its
// network (an IPv4 /24, an IPv6 /48): enough to recognise a place, less
// personal data at rest.
func (s *Sessions) startOf(r *http.Request, passkeyID string) sessionStart {
	return sessionStart{passkeyID: passkeyID, userAgent: cleanUserAgent(r.UserAgent()), clientAddr: maskAddr(s.kit.Proxy.ClientAddr(r))}
}

func maskAddr(a netip.Addr) string {
	bits := 48
	if a.Is4() {
		bits = 24
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return ""
	}
	return p.String()
}

// cleanUserAgent keeps at most maxUserAgent bytes of printable text, so a
// hostile header cannot put control characters or invalid UTF-8 into the
// owner's listing.
func cleanUserAgent(ua string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(ua) {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r) > maxUserAgent {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// describeSession stores how session sid started; a session started by a
// passkey counts as verified by it.
func (s store) describeSession(ctx context.Context, sid string, st sessionStart, now time.Time) error {
	if _, err := s.db.Exec(ctx, `UPDATE sessions SET passkey_id = $2, user_agent = $3, client_addr = $4 WHERE id = $1`,
		sid, st.passkeyID, st.userAgent, st.clientAddr); err != nil {
		return sqldb.Err("describe session", err)
	}
	if st.passkeyID == "" {
		return nil
	}
	return s.markVerified(ctx, sid, st.passkeyID, now)
}

// sessionRecord is a session as its owner sees it.
type sessionRecord struct {
	ID            string `json:"id"`
	Current       bool   `json:"current"`
	CreatedAt     string `json:"created_at"`
	ExpiresAt     string `json:"expires_at"`
	VerifiedAt    string `json:"verified_at,omitempty"`
	PasskeyID     string `json:"passkey_id,omitempty"`
	UserAgent     string `json:"user_agent,omitempty"`
	ClientAddress string `json:"client_address,omitempty"`
}

// maxListedSessions bounds GET /v1/auth/sessions; the newest are listed.
const maxListedSessions = 200

// liveSessions returns the unexpired sessions of ns, newest first.
func (s store) liveSessions(ctx context.Context, ns string, now time.Time) ([]sessionRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, created_at, expires_at, verified_at, passkey_id, user_agent, client_addr
		FROM sessions WHERE namespace = $1 AND expires_at > $2 ORDER BY created_at DESC, id LIMIT $3`, ns, sqldb.Micros(now), maxListedSessions)
	if err != nil {
		return nil, sqldb.Err("list sessions", err)
	}
	defer rows.Close()
	out := []sessionRecord{}
	for rows.Next() {
		var (
			r                sessionRecord
			created, expires int64
			verified         sql.NullInt64
		)
		if err := rows.Scan(&r.ID, &created, &expires, &verified, &r.PasskeyID, &r.UserAgent, &r.ClientAddress); err != nil {
			return nil, sqldb.Err("scan session", err)
		}
		r.CreatedAt, r.ExpiresAt, r.VerifiedAt = web.Timestamp(sqldb.FromMicros(created)), web.Timestamp(sqldb.FromMicros(expires)), web.Timestamp(sqldb.FromNullMicros(verified))
		out = append(out, r)
	}
	return out, sqldb.Err("list sessions", rows.Err())
}

// endSession deletes session id of ns and reports whether there was one.
func (s store) endSession(ctx context.Context, ns, id string) (bool, error) {
	res, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE id = $1 AND namespace = $2`, id, ns)
	if err != nil {
		return false, sqldb.Err("delete session", err)
	}
	n, err := res.RowsAffected()
	return n > 0, sqldb.Err("delete session", err)
}

// listSessions is GET /v1/auth/sessions.
func (a *Accounts) listSessions(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	list, err := a.store.liveSessions(r.Context(), sess.namespace, a.kit.Now())
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	for i := range list {
		list[i].Current = list[i].ID == sess.id
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"sessions": list})
}

// endSessionRoute is DELETE /v1/auth/sessions/{id}. It needs no step-up:
// ending a session only takes access away, and an owner who finds a
// stranger's session must be able to end it at once. Ending the current
// session also clears its cookie, as logout does.
func (a *Accounts) endSessionRoute(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	id := r.PathValue("id")
	ok, err := a.store.endSession(r.Context(), sess.namespace, id)
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	if !ok {
		apierror.Write(w, r, errSessionNotFound)
		return
	}
	a.kit.Log.InfoContext(r.Context(), "session ended by owner", "namespace", sess.namespace, "session", id)
	if id == sess.id {
		http.SetCookie(w, a.sessions.clearedSessionCookie(r))
	}
	w.WriteHeader(http.StatusNoContent)
}
