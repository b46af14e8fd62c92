package controlplane

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// Every string an owner is shown beside a decision is refused at input when
// it holds a character that hides or reorders text: U+202E makes
// "Build bot‮exe.gpj" read as "Build botjpg.exe" beside Approve.
func TestDisplayStringsRefuseHiddenCharacters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), withWebhooks(nil))
	owner, key := claimWorld(e)
	svcID := e.serviceID(owner)
	claim := func(field, v string) func() resp {
		return func() resp {
			body := submitBody("acme", pubKey(newAgent(t, "acme")), "github")
			body[field] = v
			return e.signed("POST", "/v1/claims", body, withKey(key))
		}
	}
	for _, tt := range []struct {
		name string
		send func() resp
	}{
		{"agent_name with a right-to-left override", claim("agent_name", "Build bot\u202Eexe.gpj")},
		{"agent_id with a zero-width space", claim("agent_id", "deploy\u200B-1")},
		{"subject with a bidi isolate", claim("subject", "alice\u2066@evil\u2069")},
		{"subject with a no-break space passing for a space", claim("subject", "alice\u00A0admin")},
		{"agent_name with tag characters", claim("agent_name", "bot\U000E0041\U000E0042")},
		{"agent_name with a line separator", claim("agent_name", "bot\u2028Approved by admin")},
		{"service name with a right-to-left override", func() resp {
			return e.do("POST", "/v1/services", map[string]any{"name": "Pay\u202Eroll", "service_endpoint": "https://svc.example"}, owner)
		}},
		{"service renamed with a byte order mark", func() resp {
			return e.do("PATCH", "/v1/services/"+svcID, map[string]any{"name": "\uFEFFgithub"}, owner)
		}},
		{"service endpoint with a right-to-left override", func() resp {
			return e.do("POST", "/v1/services", map[string]any{"name": "Payroll", "service_endpoint": "https://svc.example/\u202Emoc.evil"}, owner)
		}},
		{"webhook URL with a right-to-left override", func() resp {
			return e.do("POST", "/v1/services/"+svcID+"/webhooks", map[string]any{"url": "https://hooks.example/\u202Emoc.live", "events": []string{"request.submitted"}}, owner)
		}},
		{"webhook URL with a Hangul filler", func() resp {
			return e.do("POST", "/v1/services/"+svcID+"/webhooks", map[string]any{"url": "https://hooks.example/\u3164", "events": []string{"request.submitted"}}, owner)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.send().want(t, http.StatusBadRequest, "VALIDATION_ERROR")
			if msg := r.json(t)["error"].(string); !strings.Contains(msg, `\u`) && !strings.Contains(msg, `\U`) {
				t.Errorf("the error does not name the character: %q", msg)
			}
		})
	}
	t.Run("letters of any script are names", func(t *testing.T) {
		body := submitBody("acme", pubKey(newAgent(t, "acme")), "github")
		body["agent_name"], body["subject"] = "Zürich ботик 東京 \u2764\uFE0F", "José"
		e.signed("POST", "/v1/claims", body, withKey(key)).want(t, http.StatusCreated, "")
		e.do("POST", "/v1/services", map[string]any{"name": "Café Ops", "service_endpoint": "https://svc.example"}, owner).want(t, http.StatusCreated, "")
	})
}

// Strings stored before the check (or by an older version) still show
// what they hold: each hidden character is written out as \uXXXX, in text
// and in the labels of the buttons beside it.
func TestDashboardShowsHiddenCharactersOfStoredText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	owner, key := claimWorld(e)
	c := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 201, "").json(t)
	if _, err := e.st.db.Exec(context.Background(), `UPDATE claims SET agent_name = $1, subject = $2 WHERE id = $3`,
		"Build bot\u202Eexe.gpj", "alice\u200B", c["claim_id"]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.db.Exec(context.Background(), `UPDATE services SET name = $1 WHERE slug = 'github'`, "Git\u2066Hub"); err != nil {
		t.Fatal(err)
	}
	claims := string(e.page("/claims", owner).body)
	for _, want := range []string{`<strong>Build bot\u202Eexe.gpj</strong>`, `alice\u200B`, `aria-label="Approve Build bot\u202Eexe.gpj on github"`} {
		if !strings.Contains(claims, want) {
			t.Errorf("the claims page lacks %s", want)
		}
	}
	services := string(e.page("/services", owner).body)
	if !strings.Contains(services, `Git\u2066Hub`) {
		t.Error("the services page does not show the stored name's hidden character")
	}
	for page, body := range map[string]string{"claims": claims, "services": services} {
		if strings.ContainsAny(body, "\u202E\u200B\u2066") {
			t.Errorf("the %s page carries a hidden character as it is", page)
		}
	}
}
