package controlplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idnhq/idn/controlplane/internal/backoff"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

// Registry is the on-chain identity registry, one method per contract
// operation of the IDNRegistry contract (package registry/evm). Writes
// return the transaction hash once the write is mined. The control plane
// registers namespaces with RegisterNamespace, writes approvals with
// ApproveClaimDirect and revocations with RevokeClaimDirect (single step,
// keyed by the claim tuple); the other operations are part of the contract
// for backends and tools.
//
// A write may be repeated: after a crash between the chain accepting it
// and the hash being recorded, or after a receipt that did not come in
// time. Backends must make such a repeat send nothing and return the hash
// of the write that already happened (registry/evm checks the chain
// first); a revocation of a tuple the registry never authorised may
// return "".
type Registry interface {
	RegisterNamespace(ctx context.Context, name string) (txHash string, err error)
	TransferNamespace(ctx context.Context, name, newOwner string) (txHash string, err error)
	SubmitClaim(ctx context.Context, namespace, publicKey, service string) (claimID, txHash string, err error)
	ApproveClaim(ctx context.Context, claimID string) (txHash string, err error)
	RejectClaim(ctx context.Context, claimID string) (txHash string, err error)
	RevokeClaim(ctx context.Context, claimID string) (txHash string, err error)
	ApproveClaimDirect(ctx context.Context, namespace, publicKey, service string) (txHash string, err error)
	RevokeClaimDirect(ctx context.Context, namespace, publicKey, service string) (txHash string, err error)
	IsAuthorized(ctx context.Context, namespace, publicKey, service string) (bool, error)
}

// Registry write modes (BLOCKCHAIN_MODE).
const (
	RegistryDisabled = "disabled"
	RegistrySync     = "sync"
	RegistryMemory   = "memory"
	RegistryQueue    = "queue"
)

// RegistryConfig selects registry writes (Config.Registry).
type RegistryConfig struct {
	// Mode is one of the Registry* constants (BLOCKCHAIN_MODE); empty means
	// RegistryDisabled.
	//
	//   - sync: the owner's approve or revoke writes to the registry and
	//     waits for the receipt before the claim moves; the claim then
	//     carries the hash. A failed write answers 502
	//     REGISTRY_WRITE_FAILED and leaves the claim as it was. A new
	//     namespace is registered during sign-up. RunWorkers only finishes
	//     what the request could not: a hash lost to a crash between the
	//     write and its recording (found on chain, not sent again), a
	//     namespace whose registration failed, and writes owed from before
	//     the mode was on.
	//   - memory: the claim moves at once; its write is queued in this
	//     process and made by RunWorkers, retried with backoff. Queued
	//     writes are lost if the process stops.
	//   - queue: the claim moves at once; RunWorkers finds the writes the
	//     registry lacks in the database (namespaces without
	//     registration_tx_hash, approved claims without approval_tx_hash,
	//     revoked ones with approval_tx_hash but no revocation_tx_hash), so
	//     no write is lost to a restart, and retries with backoff. Each
	//     write is leased by one worker of one instance at a time, and the
	//     backend checks the chain before sending, so a write interrupted
	//     after it was sent lands exactly once. Writes of one tuple are
	//     made in the order of its claims' changes.
	//
	// In every mode but disabled, a failed write's reason is shown to the
	// owner on the claim (registry_error) until a later attempt succeeds.
	// Turning a mode on for an existing database also writes the
	// namespaces and approvals made while writes were disabled.
	Mode string
	// Backend performs the writes. Required unless Mode is disabled.
	Backend Registry
	// MaxAttempts is the failed attempts after which a write is given up
	// (its claim keeps registry_error and no hash); zero means 10.
	MaxAttempts int
	// RetryWindow spreads the attempts like webhook retries; zero means
	// 24 hours.
	RetryWindow time.Duration
	// Timeout bounds each backend call; zero means 2 minutes (a write may
	// wait 60 s for its receipt). A queue lease lasts twice as long plus a
	// minute, so a write still waiting is never taken over.
	Timeout time.Duration
	// Concurrency is how many writes RunWorkers has in flight at once;
	// zero means 16.
	Concurrency int
	// ExplorerURL is the base of the chain's block explorer
	// (https://basescan.org); the dashboard links a claim's transactions
	// to ExplorerURL + "/tx/" + hash. Empty shows the hashes unlinked.
	ExplorerURL string
}

// Registry write operations, as recorded in registry_jobs.op.
const (
	registryApprove  = "approve"
	registryRevoke   = "revoke"
	registryRegister = "register"
)

// registryTask is one write: the approval or revocation of a claim
// (subject is its id) or the registration of a namespace (subject is its
// name).
type registryTask struct{ subject, op string }

// registryRunner makes the registry writes of one Server.
type registryRunner struct {
	mode        string
	backend     Registry
	store       *Store
	log         *slog.Logger
	now         func() time.Time
	threshold   int
	window      time.Duration
	timeout     time.Duration
	concurrency int
	wake        chan struct{}

	mu      sync.Mutex
	pending map[registryTask]*memoryJob // memory mode
}

// memoryJob is a memory-mode write waiting for its turn.
type memoryJob struct {
	tuple   string // claim tuple; "" for a namespace
	failed  int
	due     time.Time
	queued  time.Time
	running bool
}

func newRegistryRunner(c RegistryConfig, st *Store, log *slog.Logger, now func() time.Time) (*registryRunner, error) {
	switch c.Mode {
	case "", RegistryDisabled:
		return nil, nil
	case RegistrySync, RegistryMemory, RegistryQueue:
	default:
		return nil, fmt.Errorf("controlplane: registry mode %q is not one of disabled, sync, memory, queue", c.Mode)
	}
	if c.Backend == nil {
		return nil, fmt.Errorf("controlplane: registry mode %q needs a registry backend (RegistryConfig.Backend, e.g. registry/evm)", c.Mode)
	}
	if c.MaxAttempts < 0 || c.RetryWindow < 0 || c.Timeout < 0 || c.Concurrency < 0 {
		return nil, errors.New("controlplane: registry MaxAttempts, RetryWindow, Timeout and Concurrency must not be negative")
	}
	r := &registryRunner{mode: c.Mode, backend: c.Backend, store: st, log: log, now: now,
		threshold: c.MaxAttempts, window: c.RetryWindow, timeout: c.Timeout, concurrency: c.Concurrency,
		wake: make(chan struct{}, 1), pending: map[registryTask]*memoryJob{}}
	setDefault(&r.threshold, 10)
	setDefault(&r.window, 24*time.Hour)
	setDefault(&r.timeout, 2*time.Minute)
	setDefault(&r.concurrency, 16)
	return r, nil
}

// lease is how long a queue worker holds a write.
func (r *registryRunner) lease() time.Duration { return 2*r.timeout + time.Minute }

// applyClaimAction applies an owner's action to claim id of ns. In sync mode an
// approval or revocation is written to the registry first, and the claim
// moves only once the write is mined, carrying its hash; a failed write
// leaves the claim as it was.
func (s *Server) applyClaimAction(ctx context.Context, ns, id, action string, now time.Time) (Claim, error) {
	cutoff := now.Add(-s.cfg.PendingExpiry)
	r := s.registry
	if r == nil || r.mode != RegistrySync || action == "reject" {
		return s.store.transition(ctx, ns, id, action, cutoff, now)
	}
	c, err := s.store.claimByID(ctx, id)
	if err == nil && c.Namespace != ns {
		err = errClaimNotFound
	}
	if err != nil {
		return Claim{}, err
	}
	if t, ok := transitions[action]; !ok || c.Status != t.from {
		return Claim{}, &transitionError{Action: action, From: c.Status}
	}
	if c.Status == StatusPending && !c.CreatedAt.After(cutoff) {
		return Claim{}, &transitionError{Action: action, From: StatusExpired}
	}
	op, column := registryApprove, "approval_tx_hash"
	if action == "revoke" {
		op, column = registryRevoke, "revocation_tx_hash"
	}
	var hash string
	if op == registryApprove || c.ApprovalTxHash != "" { // a revocation needs a recorded approval
		if hash, err = r.writeClaim(ctx, c, op); err != nil {
			r.log.WarnContext(ctx, "registry write failed; the claim is unchanged", "claim_id", id, "op", op, "err", err)
			return Claim{}, &registryWriteError{Err: err}
		}
	}
	moved, err := s.store.transition(ctx, ns, id, action, cutoff, now)
	if err != nil {
		if op == registryApprove {
			r.undoApproval(ctx, c)
		}
		return moved, err
	}
	if hash != "" {
		// The write is mined: record it even if the request is ending. A
		// crash before this line leaves the hash to RunWorkers, which finds
		// the write on chain.
		if err := s.store.setTxHash(context.WithoutCancel(ctx), id, column, hash); err != nil {
			return moved, err
		}
		if op == registryApprove {
			moved.ApprovalTxHash = hash
		} else {
			moved.RevocationTxHash = hash
		}
	}
	return moved, nil
}

// undoApproval withdraws an approval written for a claim that could not
// move after all (it expired or was rejected meanwhile), unless another
// claim of the tuple is approved.
func (r *registryRunner) undoApproval(ctx context.Context, c Claim) {
	ctx = context.WithoutCancel(ctx)
	if live, err := r.store.latestClaim(ctx, c.Namespace, c.PublicKey, c.Service); err == nil && live.Status == StatusApproved {
		return
	}
	if _, err := r.backend.RevokeClaimDirect(ctx, c.Namespace, c.PublicKey, c.Service); err != nil {
		r.log.ErrorContext(ctx, "registry approval of a claim that did not move could not be withdrawn",
			"claim_id", c.ID, "err", err)
	}
}

// claimChanged is called after a claim change has committed.
func (r *registryRunner) claimChanged(c Claim) {
	if c.Status != StatusApproved && c.Status != StatusRevoked || r.mode == RegistrySync {
		return
	}
	op := registryApprove
	if c.Status == StatusRevoked {
		op = registryRevoke
	}
	r.enqueue(registryTask{c.ID, op}, c.Namespace+"|"+c.PublicKey+"|"+c.Service)
}

// namespaceCreated is called after sign-up created namespace ns. Sync mode
// registers it before sign-up answers; a failure is left to RunWorkers
// rather than failing a sign-up that has already happened.
func (s *Server) namespaceCreated(ctx context.Context, ns string) {
	r := s.registry
	if r == nil {
		return
	}
	if r.mode == RegistrySync {
		if err := r.runLeased(context.WithoutCancel(ctx), registryTask{ns, registryRegister}); err != nil {
			r.log.WarnContext(ctx, "registering the namespace failed; it will be retried", "namespace", ns, "err", err)
		}
		return
	}
	r.enqueue(registryTask{ns, registryRegister}, "")
}

// enqueue queues t in memory mode and wakes RunWorkers.
func (r *registryRunner) enqueue(t registryTask, tuple string) {
	if r.mode == RegistryMemory {
		r.mu.Lock()
		if _, ok := r.pending[t]; !ok {
			now := r.now()
			r.pending[t] = &memoryJob{tuple: tuple, due: now, queued: now}
		}
		r.mu.Unlock()
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// runDue makes every write that is due, Concurrency at a time, until none
// is left: the in-process queue in memory mode, the database's to-do list
// otherwise. When nothing can start but writes are in flight, it waits for
// one to end, since that may let a tuple's next write go.
func (r *registryRunner) runDue(ctx context.Context) error {
	p := &registryPass{sem: make(chan struct{}, r.concurrency), ended: make(chan struct{}, 1)}
	defer p.wg.Wait()
	for ctx.Err() == nil {
		var (
			started int
			err     error
		)
		if r.mode == RegistryMemory {
			started = r.startMemory(ctx, p)
		} else {
			started, err = r.startQueued(ctx, p)
		}
		if err != nil {
			return err
		}
		if started > 0 {
			continue
		}
		if p.running.Load() == 0 {
			return nil
		}
		select {
		case <-p.ended:
		case <-ctx.Done():
		}
	}
	return ctx.Err()
}

// registryPass runs the writes of one runDue.
type registryPass struct {
	sem     chan struct{} // a slot per write in flight
	ended   chan struct{} // a write ended
	running atomic.Int64
	wg      sync.WaitGroup
}

// run starts fn once a slot is free.
func (p *registryPass) run(fn func()) {
	p.sem <- struct{}{}
	p.running.Add(1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		fn()
		<-p.sem
		p.running.Add(-1)
		select {
		case p.ended <- struct{}{}:
		default:
		}
	}()
}

// startQueued leases the due writes of the database and starts them. A
// lease is taken before the write starts, so the next look at the to-do
// list no longer sees it; a write of a tuple waits while an older write of
// the same tuple is owed.
func (r *registryRunner) startQueued(ctx context.Context, p *registryPass) (int, error) {
	tasks, err := r.store.registryTodo(ctx, r.now(), 2*r.concurrency)
	if err != nil {
		return 0, err
	}
	started := 0
	for _, t := range tasks {
		token := newID("lease_")
		job, ok, err := r.store.leaseRegistryJob(ctx, t, token, r.now(), r.lease())
		if err != nil {
			return started, err
		}
		if !ok {
			continue
		}
		started++
		p.run(func() {
			if err := r.attempt(ctx, t, token, job); err != nil {
				r.log.WarnContext(ctx, "registry write failed", "subject", t.subject, "op", t.op, "err", err)
			}
		})
	}
	return started, nil
}

// runLeased makes one write under a database lease, if it is still owed
// and no other worker holds it.
func (r *registryRunner) runLeased(ctx context.Context, t registryTask) error {
	token := newID("lease_")
	job, ok, err := r.store.leaseRegistryJob(ctx, t, token, r.now(), r.lease())
	if err != nil || !ok {
		return err
	}
	return r.attempt(ctx, t, token, job)
}

// attempt makes a leased write and records the outcome: success deletes
// the job, failure schedules a retry or gives up after the threshold.
func (r *registryRunner) attempt(ctx context.Context, t registryTask, token string, job registryJob) error {
	now := r.now()
	werr := r.write(ctx, t)
	next := time.Time{}
	if werr != nil {
		if d := backoff.Delay(job.failed+1, r.threshold, r.window); d != 0 && !now.Add(d).After(job.queued.Add(r.window)) {
			next = now.Add(d)
		}
	}
	if err := r.store.finishRegistryJob(context.WithoutCancel(ctx), t, token, werr, next, now); err != nil {
		return err
	}
	return werr
}

// startMemory starts the due writes of the in-process queue; a write of a
// tuple waits while an older write of the same tuple is queued.
func (r *registryRunner) startMemory(ctx context.Context, p *registryPass) int {
	now := r.now()
	r.mu.Lock()
	type queued struct {
		t registryTask
		j *memoryJob
	}
	all := make([]queued, 0, len(r.pending))
	for t, j := range r.pending {
		all = append(all, queued{t, j})
	}
	slices.SortFunc(all, func(a, b queued) int { return a.j.queued.Compare(b.j.queued) })
	var due []registryTask
	blocked := map[string]bool{}
	for _, q := range all {
		if q.j.tuple != "" && blocked[q.j.tuple] {
			continue
		}
		if q.j.tuple != "" {
			blocked[q.j.tuple] = true
		}
		if !q.j.running && !q.j.due.After(now) {
			q.j.running = true
			due = append(due, q.t)
		}
	}
	r.mu.Unlock()
	for _, t := range due {
		p.run(func() { r.finishMemory(ctx, t, r.write(ctx, t)) })
	}
	return len(due)
}

func (r *registryRunner) finishMemory(ctx context.Context, t registryTask, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.pending[t]
	j.running = false
	if err == nil {
		delete(r.pending, t)
		return
	}
	j.failed++
	now := r.now()
	d := backoff.Delay(j.failed, r.threshold, r.window)
	if d == 0 || now.Add(d).After(j.queued.Add(r.window)) {
		delete(r.pending, t)
		r.log.ErrorContext(ctx, "registry write given up", "subject", t.subject, "op", t.op, "attempts", j.failed, "err", err)
	} else {
		j.due = now.Add(d)
	}
	if t.op != registryRegister {
		if err := r.store.setRegistryError(context.WithoutCancel(ctx), t.subject, err); err != nil {
			r.log.ErrorContext(ctx, "recording a registry error failed", "claim_id", t.subject, "err", err)
		}
	}
}

// write makes the write t stands for if it is still owed, and records its
// hash. What is owed is read when the write is made: a claim revoked
// before its approval was written needs nothing, and a revocation waits
// for the approval's hash.
func (r *registryRunner) write(ctx context.Context, t registryTask) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if t.op == registryRegister {
		owed, err := r.store.registrationOwed(ctx, t.subject)
		if err != nil || !owed {
			return err
		}
		h, err := r.backend.RegisterNamespace(ctx, t.subject)
		if err != nil {
			return fmt.Errorf("controlplane: registry register: %w", err)
		}
		return r.store.setRegistrationHash(context.WithoutCancel(ctx), t.subject, h)
	}
	c, err := r.store.claimByID(ctx, t.subject)
	if errors.Is(err, errClaimNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	column := "approval_tx_hash"
	switch {
	case t.op == registryApprove && c.Status == StatusApproved && c.ApprovalTxHash == "":
	case t.op == registryRevoke && c.Status == StatusRevoked && c.ApprovalTxHash != "" && c.RevocationTxHash == "":
		column = "revocation_tx_hash"
	default:
		return nil
	}
	h, err := r.writeClaim(ctx, c, t.op)
	if err != nil {
		return err
	}
	// The write happened: record it even if ctx ended meanwhile.
	return r.store.setTxHash(context.WithoutCancel(ctx), c.ID, column, h)
}

// writeClaim writes c's approval or revocation to the registry.
func (r *registryRunner) writeClaim(ctx context.Context, c Claim, op string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if op == registryApprove {
		h, err := r.backend.ApproveClaimDirect(ctx, c.Namespace, c.PublicKey, c.Service)
		if err != nil {
			return "", fmt.Errorf("controlplane: registry approve: %w", err)
		}
		return h, nil
	}
	h, err := r.backend.RevokeClaimDirect(ctx, c.Namespace, c.PublicKey, c.Service)
	if err != nil {
		return "", fmt.Errorf("controlplane: registry revoke: %w", err)
	}
	return h, nil
}

// registryClaimTodo is the condition of a claim (alias c) whose write the
// registry lacks.
const registryClaimTodo = `((c.status = 'approved' AND c.approval_tx_hash IS NULL)
	OR (c.status = 'revoked' AND c.approval_tx_hash IS NOT NULL AND c.revocation_tx_hash IS NULL))`

// registryTodo returns writes that are due, namespaces first: not given
// up, not waiting for a retry, not leased by a live worker, and for a
// claim, no older write of its tuple still owed (unless given up), so a
// tuple's approvals and revocations reach the chain in order.
func (s *Store) registryTodo(ctx context.Context, now time.Time, n int) ([]registryTask, error) {
	const blocked = `(j.failed_at IS NOT NULL OR j.next_attempt_at > $1 OR j.lease_until > $1)`
	rows, err := s.db.QueryContext(ctx, `SELECT subject, op FROM (
		SELECT n.namespace AS subject, 'register' AS op, 0 AS kind, n.created_at AS at FROM namespaces n
		WHERE n.registration_tx_hash IS NULL AND n.deactivated_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM registry_jobs j WHERE j.claim_id = n.namespace AND j.op = 'register' AND `+blocked+`)
		UNION ALL
		SELECT c.id, CASE WHEN c.status = 'approved' THEN 'approve' ELSE 'revoke' END, 1, c.updated_at FROM claims c
		WHERE `+registryClaimTodo+`
			AND NOT EXISTS (SELECT 1 FROM registry_jobs j WHERE j.claim_id = c.id
				AND j.op = CASE WHEN c.status = 'approved' THEN 'approve' ELSE 'revoke' END AND `+blocked+`)
			AND NOT EXISTS (SELECT 1 FROM claims o WHERE o.namespace = c.namespace AND o.public_key = c.public_key
				AND o.service = c.service AND (o.updated_at < c.updated_at OR (o.updated_at = c.updated_at AND o.id < c.id))
				AND ((o.status = 'approved' AND o.approval_tx_hash IS NULL)
					OR (o.status = 'revoked' AND o.approval_tx_hash IS NOT NULL AND o.revocation_tx_hash IS NULL))
				AND NOT EXISTS (SELECT 1 FROM registry_jobs g WHERE g.claim_id = o.id AND g.failed_at IS NOT NULL))
	) todo ORDER BY kind, at, subject LIMIT $2`, sqldb.Micros(now), n)
	if err != nil {
		return nil, sqldb.Err("registry todo", err)
	}
	defer rows.Close()
	var tasks []registryTask
	for rows.Next() {
		var t registryTask
		if err := rows.Scan(&t.subject, &t.op); err != nil {
			return nil, sqldb.Err("registry todo", err)
		}
		tasks = append(tasks, t)
	}
	return tasks, sqldb.Err("registry todo", rows.Err())
}

// registrationOwed reports whether namespace ns is active and not yet
// registered.
func (s *Store) registrationOwed(ctx context.Context, ns string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM namespaces
		WHERE namespace = $1 AND registration_tx_hash IS NULL AND deactivated_at IS NULL`, ns).Scan(&n)
	return n > 0, sqldb.Err("registration owed", err)
}

// registryJob is the attempt state of one write.
type registryJob struct {
	failed int
	queued time.Time
}

// leaseRegistryJob takes the lease of write t for leaseFor, creating its
// job row on first use: an atomic upsert that only succeeds when no live
// lease, retry wait or give-up stands in the way, so across instances
// sharing the database one worker holds a write at a time. ok is false
// when the write is held, waiting or given up, or is no longer owed.
func (s *Store) leaseRegistryJob(ctx context.Context, t registryTask, token string, now time.Time, leaseFor time.Duration) (registryJob, bool, error) {
	var j registryJob
	queued, owed, err := s.registryOwed(ctx, t)
	if err != nil || !owed {
		return j, false, err
	}
	err = s.db.WriteRow(ctx, `INSERT INTO registry_jobs (claim_id, op, attempts, next_attempt_at, lease_token, lease_until)
		VALUES ($1, $2, 0, $3, $4, $5)
		ON CONFLICT (claim_id, op) DO UPDATE SET lease_token = excluded.lease_token, lease_until = excluded.lease_until
		WHERE registry_jobs.failed_at IS NULL AND registry_jobs.next_attempt_at <= $3
			AND (registry_jobs.lease_until IS NULL OR registry_jobs.lease_until <= $3)
		RETURNING attempts`, t.subject, t.op, sqldb.Micros(now), token, sqldb.Micros(now.Add(leaseFor))).Scan(&j.failed)
	if errors.Is(err, sql.ErrNoRows) {
		return j, false, nil
	}
	if err != nil {
		return j, false, sqldb.Err("lease registry job", err)
	}
	j.queued = queued
	return j, true, nil
}

// registryOwed reports whether write t is still owed, and since when (the
// change that made it owed: the retry window counts from there).
func (s *Store) registryOwed(ctx context.Context, t registryTask) (time.Time, bool, error) {
	var (
		at  int64
		err error
	)
	switch t.op {
	case registryRegister:
		err = s.db.QueryRowContext(ctx, `SELECT created_at FROM namespaces
			WHERE namespace = $1 AND registration_tx_hash IS NULL AND deactivated_at IS NULL`, t.subject).Scan(&at)
	case registryApprove:
		err = s.db.QueryRowContext(ctx, `SELECT updated_at FROM claims c
			WHERE id = $1 AND status = 'approved' AND approval_tx_hash IS NULL`, t.subject).Scan(&at)
	default:
		err = s.db.QueryRowContext(ctx, `SELECT updated_at FROM claims c
			WHERE id = $1 AND status = 'revoked' AND approval_tx_hash IS NOT NULL AND revocation_tx_hash IS NULL`, t.subject).Scan(&at)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, sqldb.Err("registry owed", err)
	}
	return sqldb.FromMicros(at), true, nil
}

// finishRegistryJob records an attempt under the lease: success deletes
// the job; failure counts it, schedules next (or gives up when next is
// zero) and shows the reason on the claim.
func (s *Store) finishRegistryJob(ctx context.Context, t registryTask, token string, werr error, next, now time.Time) error {
	if werr == nil {
		_, err := s.db.Exec(ctx, `DELETE FROM registry_jobs WHERE claim_id = $1 AND op = $2 AND lease_token = $3`, t.subject, t.op, token)
		return sqldb.Err("finish registry job", err)
	}
	var failed sql.NullInt64
	if next.IsZero() {
		failed, next = sqldb.NullMicros(now), now
	}
	res, err := s.db.Exec(ctx, `UPDATE registry_jobs SET attempts = attempts + 1, next_attempt_at = $4, last_error = $5,
			failed_at = $6, lease_token = NULL, lease_until = NULL
		WHERE claim_id = $1 AND op = $2 AND lease_token = $3`, t.subject, t.op, token, sqldb.Micros(next), registryReason(werr), failed)
	if err != nil {
		return sqldb.Err("finish registry job", err)
	}
	if n, _ := res.RowsAffected(); n == 0 || t.op == registryRegister {
		return nil // the lease was lost: its new holder reports
	}
	return s.setRegistryError(ctx, t.subject, werr)
}

// registryReason is a write error as the owner sees it: without the
// package prefixes, at most 500 bytes.
func registryReason(err error) string {
	msg := err.Error()
	for _, p := range []string{"controlplane: ", "evm: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	if len(msg) > 500 {
		msg = msg[:500]
	}
	return msg
}

// setRegistryError shows a failed write on claim id.
func (s *Store) setRegistryError(ctx context.Context, id string, werr error) error {
	_, err := s.db.Exec(ctx, `UPDATE claims SET registry_error = $2 WHERE id = $1`, id, registryReason(werr))
	return sqldb.Err("record registry error", err)
}

// claimByID returns a claim by id, whoever owns it.
func (s *Store) claimByID(ctx context.Context, id string) (Claim, error) {
	c, err := scanClaim(s.db.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, errClaimNotFound
	}
	return c, sqldb.Err("claim", err)
}

// setTxHash records a registry transaction hash on a claim, once, and
// clears its registry error.
func (s *Store) setTxHash(ctx context.Context, id, column, hash string) error {
	_, err := s.db.Exec(ctx, `UPDATE claims SET `+column+` = $2, registry_error = NULL WHERE id = $1 AND `+column+` IS NULL`, id, hash)
	return sqldb.Err("record tx hash", err)
}

// setRegistrationHash records the registration of namespace ns, once.
func (s *Store) setRegistrationHash(ctx context.Context, ns, hash string) error {
	_, err := s.db.Exec(ctx, `UPDATE namespaces SET registration_tx_hash = $2 WHERE namespace = $1 AND registration_tx_hash IS NULL`, ns, hash)
	return sqldb.Err("record registration hash", err)
}

// RegistryBacklog is the state of the registry writes a database owes.
type RegistryBacklog struct {
	Owed     int       // writes not yet on chain, given-up ones excluded
	Retrying int       // of those, failed at least once and waiting for a retry
	GivenUp  int       // writes that failed MaxAttempts times
	Oldest   time.Time // when the oldest owed write became owed; zero when none
	// LastErrors are the reasons of up to 5 failed writes, newest first.
	LastErrors []string
}

// RegistryBacklog reads what registry writes the database owes (as
// `controlplane registry status` shows).
func (s *Store) RegistryBacklog(ctx context.Context) (RegistryBacklog, error) {
	var (
		q      RegistryBacklog
		oldest sql.NullInt64
	)
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(CASE WHEN failed IS NULL THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN failed IS NULL AND attempts > 0 THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN failed IS NOT NULL THEN 1 ELSE 0 END), 0),
			MIN(CASE WHEN failed IS NULL THEN at END)
		FROM (
			SELECT n.created_at AS at, j.attempts AS attempts, j.failed_at AS failed FROM namespaces n
			LEFT JOIN registry_jobs j ON j.claim_id = n.namespace AND j.op = 'register'
			WHERE n.registration_tx_hash IS NULL AND n.deactivated_at IS NULL
			UNION ALL
			SELECT c.updated_at, j.attempts, j.failed_at FROM claims c
			LEFT JOIN registry_jobs j ON j.claim_id = c.id AND j.op = CASE WHEN c.status = 'approved' THEN 'approve' ELSE 'revoke' END
			WHERE `+registryClaimTodo+`
		) owed`).Scan(&q.Owed, &q.Retrying, &q.GivenUp, &oldest)
	if err != nil {
		return q, sqldb.Err("registry queue", err)
	}
	q.Oldest = sqldb.FromNullMicros(oldest)
	rows, err := s.db.QueryContext(ctx, `SELECT claim_id, op, last_error FROM registry_jobs WHERE last_error IS NOT NULL
		ORDER BY next_attempt_at DESC LIMIT 5`)
	if err != nil {
		return q, sqldb.Err("registry queue", err)
	}
	defer rows.Close()
	for rows.Next() {
		var subject, op, msg string
		if err := rows.Scan(&subject, &op, &msg); err != nil {
			return q, sqldb.Err("registry queue", err)
		}
		q.LastErrors = append(q.LastErrors, op+" "+subject+": "+msg)
	}
	return q, sqldb.Err("registry queue", rows.Err())
}

var (
	registryOwedDesc = prometheus.NewDesc("idn_registry_queue_depth",
		"Registry writes owed (not yet on chain) by state: due (waiting for a worker or in flight), retrying (failed, waiting for a retry) or given_up.",
		[]string{"state"}, nil)
	registryScrapeErrorDesc = prometheus.NewDesc("idn_registry_queue_scrape_error",
		"1 when the last scrape could not read the registry queue.", nil, nil)
)

// Describe and Collect make the runner a Prometheus collector of its
// queue: the in-process queue in memory mode, the database's otherwise.
func (r *registryRunner) Describe(ch chan<- *prometheus.Desc) {
	ch <- registryOwedDesc
	ch <- registryScrapeErrorDesc
}

func (r *registryRunner) Collect(ch chan<- prometheus.Metric) {
	var due, retrying, givenUp float64
	failed := 0.0
	if r.mode == RegistryMemory {
		r.mu.Lock()
		for _, j := range r.pending {
			if j.failed > 0 {
				retrying++
			} else {
				due++
			}
		}
		r.mu.Unlock()
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		q, err := r.store.RegistryBacklog(ctx)
		cancel()
		if err != nil {
			failed = 1
		}
		due, retrying, givenUp = float64(q.Owed-q.Retrying), float64(q.Retrying), float64(q.GivenUp)
	}
	ch <- prometheus.MustNewConstMetric(registryOwedDesc, prometheus.GaugeValue, due, "due")
	ch <- prometheus.MustNewConstMetric(registryOwedDesc, prometheus.GaugeValue, retrying, "retrying")
	ch <- prometheus.MustNewConstMetric(registryOwedDesc, prometheus.GaugeValue, givenUp, "given_up")
	ch <- prometheus.MustNewConstMetric(registryScrapeErrorDesc, prometheus.GaugeValue, failed)
}
