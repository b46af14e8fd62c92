package ownerauth

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
)

// TestErrorRules pins the answer of every error of accounts and sessions,
// wrapped as the store wraps them, so a new one cannot fall through to
// 500.
func TestErrorRules(t *testing.T) {
	t.Parallel()
	rows := []struct {
		err  error
		code errcode.Code
	}{
		{errNamespaceNotFound, errcode.NamespaceNotFound},
		{errNamespaceDeactivated, errcode.NamespaceDeactivated},
		{ErrSessionLimit, errcode.SessionLimitReached},
		{errNamespaceTaken, errcode.NamespaceTaken},
		{errSessionInvalid, errcode.AdminUnauthorized},
		{errChallengeInvalid, errcode.ChallengeInvalid},
		{errChallengeExpired, errcode.ChallengeExpired},
		{errPasskeyCloned, errcode.PasskeyCounterRegression},
		{errPasskeyExists, errcode.PasskeyExists},
		{errPasskeyNotFound, errcode.PasskeyNotFound},
		{errLastPasskey, errcode.LastPasskey},
		{&reauthError{Reason: "not_verified"}, errcode.ReauthRequired},
		{errors.New("anything else"), errcode.InternalError},
	}
	for _, row := range rows {
		for _, err := range []error{row.err, fmt.Errorf("controlplane: op: %w", row.err)} {
			if got := web.Answer(answer(err)).Code(); got != row.code {
				t.Errorf("answer(%v) = %s, want %s", err, got, row.code)
			}
		}
	}
	e := web.Answer(answer(&reauthError{Reason: "passkey_too_new", TrustedFrom: time.Unix(1_800_000_000, 0)}))
	if d, _ := e.Extra["details"].(map[string]string); d["reason"] != "passkey_too_new" || d["passkey_trusted_from"] == "" {
		t.Errorf("REAUTH_REQUIRED details = %v", e.Extra)
	}
}

// TestPasskeyNameRefusesHiddenText: a passkey name is shown to its owner,
// so text that hides or reorders characters is refused.
func TestPasskeyNameRefusesHiddenText(t *testing.T) {
	t.Parallel()
	name := "Laptop\u202E"
	if _, e := validPasskeyName(&name); e == nil || e.Code() != errcode.ValidationError {
		t.Errorf("validPasskeyName = %v", e)
	}
}
