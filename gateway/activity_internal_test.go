package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/mcpevent"
)

// Attack: an approved agent calls tools with 2 MB names while the
// control plane is away. Each queued activity record keeps at most
// textcap.Name bytes of the name, so the report queue's 10,000 records
// cannot hold gigabytes.
func TestQueuedActivityKeepsNoLongToolName(t *testing.T) {
	t.Parallel()
	vault := mcpVault(t)
	a := mcpActivity(context.Background(), mcpevent.Decision{ConnectionID: "m", Method: "tools/call", Tool: strings.Repeat("t", 2<<20), Outcome: "not_found"}, vault)
	if len(a.Tool) != textcap.Name {
		t.Errorf("a queued record keeps %d bytes of the tool name", len(a.Tool))
	}
}
