package approval_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/approval/approvaltest"
)

// replicas are Gates sharing one Store, desk and pinned keys, as a
// fleet's replicas (or a gateway and its restart) do.
type replicas struct {
	*fixture
	store approval.Store
	gates []*approval.Gate
}

func newReplicas(t *testing.T, store approval.Store, n int) *replicas {
	t.Helper()
	f := newFixture(t)
	r := &replicas{fixture: f, store: store}
	for range n {
		r.gates = append(r.gates, r.gate(t))
	}
	return r
}

// gate starts one more Gate on the shared store: a replica, or a restart.
func (r *replicas) gate(t *testing.T) *approval.Gate {
	t.Helper()
	pinned := approvaltest.Keys("acme", r.owner)
	keys := func() *approval.Keys { return pinned }
	g, err := approval.New(approval.Config{Gateway: gatewayKey, Desk: r.desk, Keys: keys, Store: r.store,
		Clock: func() time.Time { return r.now }})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func passes(t *testing.T, g *approval.Gate, c *approval.Call) bool {
	t.Helper()
	err := g.Admit(context.Background(), c)
	var req *approval.RequiredError
	var denied *approval.DeniedError
	switch {
	case err == nil:
		return true
	case errors.As(err, &req), errors.As(err, &denied):
		return false
	}
	t.Fatalf("Admit: %v", err)
	return false
}

// TestApprovalCountsAcrossReplicas: a request filed on one replica and
// approved for two uses lets two calls through, on any replica, and no
// third.
func TestApprovalCountsAcrossReplicas(t *testing.T) {
	r := newReplicas(t, &approval.MemoryStore{}, 2)
	a, b := r.gates[0], r.gates[1]
	if passes(t, a, payment()) {
		t.Fatal("an unapproved call passed")
	}
	filed := r.desk.filed[0]
	if passes(t, b, payment()) || len(r.desk.filed) != 1 {
		t.Fatalf("the retry on the other replica passed, or filed anew (%d filed)", len(r.desk.filed))
	}
	r.approve(filed, 2, time.Time{}, r.owner)
	if !passes(t, b, payment()) || !passes(t, a, payment()) {
		t.Fatal("an approved use was refused")
	}
	if passes(t, b, payment()) || passes(t, a, payment()) {
		t.Fatal("a third call passed an approval for two")
	}
}

// TestApprovalSurvivesRestart: a Gate started on the store of one that
// filed and saw the approval honours its remaining use without filing.
func TestApprovalSurvivesRestart(t *testing.T) {
	r := newReplicas(t, &approval.MemoryStore{}, 1)
	passes(t, r.gates[0], payment())
	filed := r.desk.filed[0]
	r.approve(filed, 2, time.Time{}, r.owner)
	if !passes(t, r.gates[0], payment()) {
		t.Fatal("the approved call was refused")
	}
	restarted := r.gate(t)
	if !passes(t, restarted, payment()) {
		t.Fatal("the restarted gateway refused the approval's second use")
	}
	if len(r.desk.filed) != 1 {
		t.Fatalf("%d requests filed, want the one", len(r.desk.filed))
	}
}

// TestConcurrentRetriesOnTwoReplicasSpendOneUse is the attack of an agent
// that sends 16 copies of an approved call at once, spread over two
// replicas: one passes.
func TestConcurrentRetriesOnTwoReplicasSpendOneUse(t *testing.T) {
	r := newReplicas(t, &approval.MemoryStore{}, 2)
	passes(t, r.gates[0], payment())
	r.approve(r.desk.filed[0], 1, time.Time{}, r.owner)
	var passed atomic.Int64
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if r.gates[i%2].Admit(context.Background(), payment()) == nil {
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	if passed.Load() != 1 {
		t.Fatalf("%d of 16 concurrent calls passed a single-use approval", passed.Load())
	}
}

// table is a shared store that someone else can write, as a database's
// rows: tests edit rows directly.
type table struct {
	mu   sync.Mutex
	rows map[string]*approval.Hold
	// order lists the bindings as first added.
	order []string
}

func (s *table) Hold(_ context.Context, binding string) (*approval.Hold, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.rows[binding]; h != nil {
		return h.Clone(), nil
	}
	return nil, nil
}

func (s *table) Add(_ context.Context, h *approval.Hold, now time.Time) (*approval.Hold, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev := s.rows[h.Binding]; prev != nil && prev.Live(now) {
		return prev.Clone(), nil
	}
	if s.rows[h.Binding] == nil {
		s.order = append(s.order, h.Binding)
	}
	s.rows[h.Binding] = h.Clone()
	return h.Clone(), nil
}

func (s *table) Spend(_ context.Context, binding, id string, a *approval.Approval) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.rows[binding]
	if h == nil || h.ID != id || h.Spent >= a.Uses {
		return false, nil
	}
	h.Approval, h.Spent = a, h.Spent+1
	return true, nil
}

// write edits the row of the i-th binding added.
func (s *table) write(i int, edit func(h *approval.Hold, first *approval.Hold)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	edit(s.rows[s.order[i]], s.rows[s.order[0]].Clone())
}

// TestTamperedHoldsRefused: a writer of the shared store (not the
// owner's passkey) cannot release a call. The first call is approved for
// two uses and spends one; then the row of the call retried is edited.
func TestTamperedHoldsRefused(t *testing.T) {
	rows := []struct {
		name string
		// other, when set, is the call retried (it files its own hold
		// first); nil retries the approved call.
		other func(*approval.Call)
		edit  func(h, first *approval.Hold)
		// spent takes the approval's second use before the edit.
		spent bool
		// later is how long after the edit the call is retried.
		later time.Duration
	}{
		{"uses raised in the store", nil, func(h, _ *approval.Hold) { h.Approval.Uses = 50 }, true, 0},
		{"window stretched in the store", nil, func(h, _ *approval.Hold) { h.Approval.Until = h.ExpiresAt.Add(time.Hour) }, false, 15 * time.Minute},
		{"approval moved to another agent", func(c *approval.Call) { c.PublicKey = "ed25519:mallory" }, moved, false, 0},
		{"approval moved to another subject", func(c *approval.Call) { c.Subject = "bob" }, moved, false, 0},
		{"approval moved to other arguments", func(c *approval.Call) { c.Arguments = []byte(`{"to":"mallory","amount":100}`) }, moved, false, 0},
		{"assertion copied to another hold", func(c *approval.Call) { c.Subject = "bob" }, func(h, first *approval.Hold) { h.Approval = first.Approval }, false, 0},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			st := &table{rows: map[string]*approval.Hold{}}
			r := newReplicas(t, st, 2)
			a, b := r.gates[0], r.gates[1]
			passes(t, a, payment())
			r.approve(r.desk.filed[0], 2, time.Time{}, r.owner)
			if !passes(t, a, payment()) {
				t.Fatal("the approved call was refused")
			}
			call, i := payment(), 0
			if row.other != nil {
				row.other(call)
				passes(t, b, call)
				i = 1
			}
			if row.spent && !passes(t, b, call) {
				t.Fatal("the second use was refused")
			}
			st.write(i, row.edit)
			r.now = r.now.Add(row.later)
			if passes(t, b, call) {
				t.Fatal("the call passed on a tampered hold")
			}
		})
	}
}

// moved puts the first call's approved hold in another call's row.
func moved(h, first *approval.Hold) {
	binding := h.Binding
	*h = *first
	h.Binding = binding
}

// failing is a hold store whose backend is out of reach.
type failing struct{ approval.MemoryStore }

var errDown = errors.New("connection refused")

func (*failing) Hold(context.Context, string) (*approval.Hold, error) { return nil, errDown }

func TestStoreOutageRefusesTheCall(t *testing.T) {
	r := newReplicas(t, &failing{}, 1)
	err := r.gates[0].Admit(context.Background(), payment())
	var se *approval.StoreError
	if !errors.As(err, &se) || !errors.Is(err, approval.ErrStore) || !errors.Is(err, errDown) {
		t.Fatalf("Admit = %v, want a StoreError", err)
	}
	if len(r.desk.filed) != 0 {
		t.Fatal("a request was filed while the store was out of reach")
	}
}
