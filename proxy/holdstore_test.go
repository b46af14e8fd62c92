package proxy

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/idnhq/idn/approval"
)

// TestApprovalRouteStoreDown: while the store of holds does not answer, a
// held call is refused 503 DATABASE_UNAVAILABLE, neither forwarded nor
// filed.
func TestApprovalRouteStoreDown(t *testing.T) {
	down := &approval.StoreError{Err: errors.New("connection refused")}
	g := newGateway(t, gatewayOptions{approvals: approvalsFunc(func(context.Context, *approval.Call) error { return down })})
	a := g.do(g.request(g.agent, "POST", "/proxy/pay/v1/payments", paymentBody))
	if a.status != http.StatusServiceUnavailable || a.env["code"] != "DATABASE_UNAVAILABLE" || g.up.lastSeen().Path != "" {
		t.Fatalf("%d %s", a.status, a.body)
	}
}
