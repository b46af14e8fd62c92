package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The quickstart runs the whole system and its demo succeeds.
func TestQuickstartOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	dir := t.TempDir()
	err := run(ctx, []string{"--dir", dir, "--once", "--gateway-addr", "127.0.0.1:0", "--controlplane-addr", "127.0.0.1:0"}, &out)
	if err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"1. Control plane running",
		"AUTH_CLAIM_REQUIRED; the gateway filed claim clm_",
		"Owner approved claim clm_",
		`→ 200 {"city":"Paris"`,
		"Open the dashboard as quickstart-agent",
		"/signin?next=%2Fclaims%3Fstatus%3Dapproved#idn_sl_",
		"idn quickstart is working",
		"go run ./cmd/idn curl",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "demo-upstream-token-") {
		t.Errorf("output shows the upstream token:\n%s", out.String())
	}
}
