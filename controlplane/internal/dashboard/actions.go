package dashboard

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"unicode/utf8"

	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/identity/display"
)

// The dashboard's Actions page: the calls the owner's gateways hold for a
// passkey approval, each with its arguments shown in full. Approving runs
// a WebAuthn assertion over the action's challenge (app.js).

func (d *Dashboard) actionPages(m web.Mux) {
	m.Handle("GET /actions", http.HandlerFunc(d.ownerPage("actions", "Actions", d.actionsView)))
}

type actionsPage struct {
	Rows []actionRow
}

type actionRow struct {
	ID, Target, Connection, Service, Gateway  string
	AgentName, AgentNS, Fingerprint, Subject  string
	Arguments, ArgumentsKind, Digest, Expires string
	Label                                     string
}

func (d *Dashboard) actionsView(r *http.Request, ns string) (any, error) {
	list, err := d.actions.Pending(r.Context(), ns)
	if err != nil {
		return nil, err
	}
	v := actionsPage{Rows: make([]actionRow, len(list))}
	for i, a := range list {
		row := actionRow{ID: a.ID, Target: a.Target, Connection: a.Connection, Service: a.Service, Gateway: a.GatewayID,
			AgentName: a.AgentName, AgentNS: a.AgentNS, Subject: a.Subject, Digest: a.Digest, Expires: web.Timestamp(a.ExpiresAt)}
		if pub, err := identity.ParsePublicKey(a.AgentKey); err == nil {
			row.Fingerprint = identity.KeyFragment(pub)
		}
		row.Arguments, row.ArgumentsKind = readable(a.Document)
		row.Label = display.Shown(a.Target) + " by " + display.Shown(cmp.Or(a.AgentName, row.Fingerprint))
		v.Rows[i] = row
	}
	return v, nil
}

// readable is the arguments of a call's document as the owner reads them:
// JSON indented, a text body as it is, any other body in base64, whole.
func readable(document string) (text, kind string) {
	var doc struct {
		Arguments  json.RawMessage `json:"arguments"`
		BodyBase64 string          `json:"body_base64"`
	}
	if err := json.Unmarshal([]byte(document), &doc); err != nil {
		return document, "document"
	}
	if len(doc.Arguments) > 0 {
		var b bytes.Buffer
		if json.Indent(&b, doc.Arguments, "", "  ") == nil {
			return b.String(), "JSON"
		}
	}
	if doc.BodyBase64 != "" {
		raw, err := base64.StdEncoding.DecodeString(doc.BodyBase64)
		if err == nil && utf8.Valid(raw) {
			return string(raw), "text"
		}
		return doc.BodyBase64, "binary, base64"
	}
	return "", "none"
}
