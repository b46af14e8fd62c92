package controlplane

import (
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/idnhq/idn/errcode"
)

// TestErrorTable pins the answer of every domain error, wrapped as the
// store wraps them, so a new one cannot fall through to 500.
func TestErrorTable(t *testing.T) {
	t.Parallel()
	rows := []struct {
		err  error
		code errcode.Code
	}{
		{errNamespaceNotFound, errcode.NamespaceNotFound},
		{errNamespaceDeactivated, errcode.NamespaceDeactivated},
		{errServiceNotFound, errcode.ServiceNotFound},
		{errSlugTaken, errcode.SlugTaken},
		{errKeyNotFound, errcode.APIKeyNotFound},
		{errKeyLimit, errcode.APIKeyLimitReached},
		{errClaimNotFound, errcode.ClaimNotFound},
		{errPendingLimit, errcode.PendingLimitReached},
		{errAgentPendingLimit, errcode.AgentPendingLimitReached},
		{errSigninLinkInvalid, errcode.SigninLinkInvalid},
		{&transitionError{Action: "approve", From: StatusRevoked}, errcode.ClaimStateConflict},
		{&registryWriteError{Err: errors.New("rpc down")}, errcode.RegistryWriteFailed},
		{sqldb.Err("insert claim", errors.New("connection refused")), errcode.DatabaseUnavailable},
		{errors.New("anything else"), errcode.InternalError},
	}
	for _, row := range rows {
		for _, err := range []error{row.err, fmt.Errorf("controlplane: op: %w", row.err)} {
			if got := toAPIError(err).Code(); got != row.code {
				t.Errorf("toAPIError(%v) = %s, want %s", err, got, row.code)
			}
		}
	}
}

// TestStoreReturnsNoHTTPErrors keeps the store free of the HTTP layer: its
// files do not import the envelope package, so they can only return
// domain errors, which errorTable maps.
func TestStoreReturnsNoHTTPErrors(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*store*.go")
	if err != nil {
		t.Fatal(err)
	}
	parts, err := filepath.Glob("*/store*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, parts...)
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == "github.com/idnhq/idn/internal/apierror" || path == "net/http" {
				t.Errorf("%s imports %s: the store returns domain errors, never HTTP answers", name, path)
			}
		}
	}
}
