// Package registrywriter writes the control plane's namespaces and claim
// approvals and revocations to an on-chain identity registry. Package
// registry/evm is the EVM backend. It runs in one of three modes:
//
//   - sync: the owner's action waits for the write;
//   - memory: writes are queued in this process;
//   - queue: writes are found in the database and leased across
//     instances, so a restart never loses one.
//
// A Writer reads and records what it owes in the control plane's database.
// In sync mode the claim lifecycle calls Write, Withdraw and Record. It
// calls ClaimChanged and NamespaceCreated after each change, and the
// process runs RunDue whenever Wake fires.
package registrywriter

import (
	"cmp"
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

// Backend is the on-chain identity registry, as far as the control plane
// writes to it. Writes return the transaction hash once the write is
// mined.
//
// A write may be repeated: after a crash between the chain accepting it
// and the hash being recorded, or after a receipt that did not come in
// time. Backends must make such a repeat send nothing and return the hash
// of the write that already happened (registry/evm checks the chain
// first). A revocation of a tuple the registry never authorised may
// return "".
type Backend interface {
	RegisterNamespace(ctx context.Context, name string) (txHash string, err error)
	ApproveClaimDirect(ctx context.Context, namespace, publicKey, service string) (txHash string, err error)
	RevokeClaimDirect(ctx context.Context, namespace, publicKey, service string) (txHash string, err error)
}

// Write modes (BLOCKCHAIN_MODE).
const (
	Disabled = "disabled"
	Sync     = "sync"
	Memory   = "memory"
	Queue    = "queue"
)

// Config selects registry writes.
type Config struct {
	// Mode is Disabled, Sync, Memory or Queue (BLOCKCHAIN_MODE); empty
	// means Disabled.
	//
	//   - sync: the owner's approve or revoke writes to the registry and
	//     waits for the receipt before the claim moves; the claim then
	//     carries the hash. A failed write answers 502
	//     REGISTRY_WRITE_FAILED and leaves the claim as it was. A new
	//     namespace is registered during sign-up. RunDue only finishes
	//     what the request could not: a hash lost to a crash between the
	//     write and its recording (found on chain, not sent again), a
	//     namespace whose registration failed, and writes owed from before
	//     the mode was on.
	//   - memory: the claim moves at once; its write is queued in this
	//     process and made by RunDue, retried with backoff. Queued
	//     writes are lost if the process stops.
	//   - queue: the claim moves at once; RunDue finds the writes the
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
	Backend Backend
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
	// Concurrency is how many writes RunDue has in flight at once;
	// zero means 16.
	Concurrency int
	// ExplorerURL is the base of the chain's block explorer
	// (https://basescan.org); the dashboard links a claim's transactions
	// to ExplorerURL + "/tx/" + hash. Empty shows the hashes unlinked.
	ExplorerURL string
}

// Write operations, as recorded in registry_jobs.op.
const (
	opApprove  = "approve"
	opRevoke   = "revoke"
	opRegister = "register"
)

// task is one write: the approval or revocation of a claim (subject is its
// id) or the registration of a namespace (subject is its name).
type task struct{ subject, op string }

// Claim is a claim as the registry sees it.
type Claim struct {
	ID, Namespace, PublicKey, Service, Status string
	ApprovalTxHash, RevocationTxHash          string
}

// Claim statuses the writer acts on.
const (
	statusApproved = "approved"
	statusRevoked  = "revoked"
)

// Writer makes the registry writes of one control plane.
type Writer struct {
	mode        string
	backend     Backend
	store       store
	log         *slog.Logger
	now         func() time.Time
	threshold   int
	window      time.Duration
	timeout     time.Duration
	concurrency int
	wake        chan struct{}

	mu      sync.Mutex
	pending map[task]*memoryJob // memory mode
}

// memoryJob is a memory-mode write waiting for its turn.
type memoryJob struct {
	tuple   string // claim tuple; "" for a namespace
	failed  int
	due     time.Time
	queued  time.Time
	running bool
}

// New returns the Writer of c over db, or nil when c.Mode is Disabled.
func New(c Config, db *sqldb.DB, log *slog.Logger, now func() time.Time) (*Writer, error) {
	switch c.Mode {
	case "", Disabled:
		return nil, nil
	case Sync, Memory, Queue:
	default:
		return nil, fmt.Errorf("controlplane: registry mode %q is not one of disabled, sync, memory, queue", c.Mode)
	}
	if c.Backend == nil {
		return nil, fmt.Errorf("controlplane: registry mode %q needs a registry backend (RegistryConfig.Backend, e.g. registry/evm)", c.Mode)
	}
	if c.MaxAttempts < 0 || c.RetryWindow < 0 || c.Timeout < 0 || c.Concurrency < 0 {
		return nil, errors.New("controlplane: registry MaxAttempts, RetryWindow, Timeout and Concurrency must not be negative")
	}
	w := &Writer{mode: c.Mode, backend: c.Backend, store: store{db}, log: log, now: now,
		threshold: cmp.Or(c.MaxAttempts, 10), window: cmp.Or(c.RetryWindow, 24*time.Hour),
		timeout: cmp.Or(c.Timeout, 2*time.Minute), concurrency: cmp.Or(c.Concurrency, 16),
		wake: make(chan struct{}, 1), pending: map[task]*memoryJob{}}
	return w, nil
}

// Sync reports whether an owner's approval or revocation waits for its
// write (Write, then Record) instead of being queued.
func (w *Writer) Sync() bool { return w.mode == Sync }

// Wake fires when writes may be due; run RunDue then.
func (w *Writer) Wake() <-chan struct{} { return w.wake }

// lease is how long a queue worker holds a write.
func (w *Writer) lease() time.Duration { return 2*w.timeout + time.Minute }

// Withdraw takes back an approval written for a claim that could not
// move after all (it expired or was rejected meanwhile), unless another
// claim of the tuple is approved.
func (w *Writer) Withdraw(ctx context.Context, c Claim) {
	ctx = context.WithoutCancel(ctx)
	var status string
	err := w.store.db.QueryRowContext(ctx, `SELECT status FROM claims
		WHERE namespace = $1 AND public_key = $2 AND service = $3
		ORDER BY CASE WHEN status IN ('pending', 'approved') THEN 0 ELSE 1 END, updated_at DESC, id DESC LIMIT 1`,
		c.Namespace, c.PublicKey, c.Service).Scan(&status)
	if err == nil && status == statusApproved {
		return
	}
	if _, err := w.backend.RevokeClaimDirect(ctx, c.Namespace, c.PublicKey, c.Service); err != nil {
		w.log.ErrorContext(ctx, "registry approval of a claim that did not move could not be withdrawn",
			"claim_id", c.ID, "err", err)
	}
}

// ClaimChanged is called after a claim change has committed: an approval
// or revocation is queued (in every mode but sync).
func (w *Writer) ClaimChanged(c Claim) {
	if c.Status != statusApproved && c.Status != statusRevoked || w.mode == Sync {
		return
	}
	op := opApprove
	if c.Status == statusRevoked {
		op = opRevoke
	}
	w.enqueue(task{c.ID, op}, c.Namespace+"|"+c.PublicKey+"|"+c.Service)
}

// NamespaceCreated is called after sign-up created namespace ns. Sync mode
// registers it before sign-up answers; a failure is left to RunDue rather
// than failing a sign-up that has already happened.
func (w *Writer) NamespaceCreated(ctx context.Context, ns string) {
	if w.mode == Sync {
		if err := w.runLeased(context.WithoutCancel(ctx), task{ns, opRegister}); err != nil {
			w.log.WarnContext(ctx, "registering the namespace failed; it will be retried", "namespace", ns, "err", err)
		}
		return
	}
	w.enqueue(task{ns, opRegister}, "")
}

// enqueue queues t in memory mode and wakes RunWorkers.
func (w *Writer) enqueue(t task, tuple string) {
	if w.mode == Memory {
		w.mu.Lock()
		if _, ok := w.pending[t]; !ok {
			now := w.now()
			w.pending[t] = &memoryJob{tuple: tuple, due: now, queued: now}
		}
		w.mu.Unlock()
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// RunDue makes every write that is due, Concurrency at a time, until none
// is left: the in-process queue in memory mode, the database's to-do list
// otherwise. When nothing can start but writes are in flight, it waits for
// one to end, since that may let a tuple's next write go.
func (w *Writer) RunDue(ctx context.Context) error {
	p := &pass{sem: make(chan struct{}, w.concurrency), ended: make(chan struct{}, 1)}
	defer p.wg.Wait()
	for ctx.Err() == nil {
		var (
			started int
			err     error
		)
		if w.mode == Memory {
			started = w.startMemory(ctx, p)
		} else {
			started, err = w.startQueued(ctx, p)
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

// pass runs the writes of one runDue.
type pass struct {
	sem     chan struct{} // a slot per write in flight
	ended   chan struct{} // a write ended
	running atomic.Int64
	wg      sync.WaitGroup
}

// run starts fn once a slot is free.
func (p *pass) run(fn func()) {
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
// list no longer sees it. A write of a tuple waits while an older write of
// the same tuple is owed.
func (w *Writer) startQueued(ctx context.Context, p *pass) (int, error) {
	tasks, err := w.store.registryTodo(ctx, w.now(), 2*w.concurrency)
	if err != nil {
		return 0, err
	}
	started := 0
	for _, t := range tasks {
		token := sqldb.NewID("lease_")
		j, ok, err := w.store.leaseRegistryJob(ctx, t, token, w.now(), w.lease())
		if err != nil {
			return started, err
		}
		if !ok {
			continue
		}
		started++
		p.run(func() {
			if err := w.attempt(ctx, t, token, j); err != nil {
				w.log.WarnContext(ctx, "registry write failed", "subject", t.subject, "op", t.op, "err", err)
			}
		})
	}
	return started, nil
}

// runLeased makes one write under a database lease, if it is still owed
// and no other worker holds it.
func (w *Writer) runLeased(ctx context.Context, t task) error {
	token := sqldb.NewID("lease_")
	j, ok, err := w.store.leaseRegistryJob(ctx, t, token, w.now(), w.lease())
	if err != nil || !ok {
		return err
	}
	return w.attempt(ctx, t, token, j)
}

// attempt makes a leased write and records the outcome: success deletes
// the job, failure schedules a retry or gives up after the threshold.
func (w *Writer) attempt(ctx context.Context, t task, token string, j jobState) error {
	now := w.now()
	werr := w.write(ctx, t)
	next := time.Time{}
	if werr != nil {
		if d := backoff.Delay(j.failed+1, w.threshold, w.window); d != 0 && !now.Add(d).After(j.queued.Add(w.window)) {
			next = now.Add(d)
		}
	}
	if err := w.store.finishRegistryJob(context.WithoutCancel(ctx), t, token, werr, next, now); err != nil {
		return err
	}
	return werr
}

// startMemory starts the due writes of the in-process queue; a write of a
// tuple waits while an older write of the same tuple is queued.
func (w *Writer) startMemory(ctx context.Context, p *pass) int {
	now := w.now()
	w.mu.Lock()
	type queued struct {
		t task
		j *memoryJob
	}
	all := make([]queued, 0, len(w.pending))
	for t, j := range w.pending {
		all = append(all, queued{t, j})
	}
	slices.SortFunc(all, func(a, b queued) int { return a.j.queued.Compare(b.j.queued) })
	var due []task
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
	w.mu.Unlock()
	for _, t := range due {
		p.run(func() { w.finishMemory(ctx, t, w.write(ctx, t)) })
	}
	return len(due)
}

func (w *Writer) finishMemory(ctx context.Context, t task, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := w.pending[t]
	j.running = false
	if err == nil {
		delete(w.pending, t)
		return
	}
	j.failed++
	now := w.now()
	d := backoff.Delay(j.failed, w.threshold, w.window)
	if d == 0 || now.Add(d).After(j.queued.Add(w.window)) {
		delete(w.pending, t)
		w.log.ErrorContext(ctx, "registry write given up", "subject", t.subject, "op", t.op, "attempts", j.failed, "err", err)
	} else {
		j.due = now.Add(d)
	}
	if t.op != opRegister {
		if err := w.store.setRegistryError(context.WithoutCancel(ctx), t.subject, err); err != nil {
			w.log.ErrorContext(ctx, "recording a registry error failed", "claim_id", t.subject, "err", err)
		}
	}
}

// write makes the write t stands for if it is still owed, and records its
// hash. What is owed is read when the write is made: a claim revoked
// before its approval was written needs nothing, and a revocation waits
// for the approval's hash.
func (w *Writer) write(ctx context.Context, t task) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	if t.op == opRegister {
		owed, err := w.store.registrationOwed(ctx, t.subject)
		if err != nil || !owed {
			return err
		}
		h, err := w.backend.RegisterNamespace(ctx, t.subject)
		if err != nil {
			return fmt.Errorf("controlplane: registry register: %w", err)
		}
		return w.store.setRegistrationHash(context.WithoutCancel(ctx), t.subject, h)
	}
	c, err := w.store.claimByID(ctx, t.subject)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case t.op == opApprove && c.Status == statusApproved && c.ApprovalTxHash == "":
	case t.op == opRevoke && c.Status == statusRevoked && c.ApprovalTxHash != "" && c.RevocationTxHash == "":
	default:
		return nil
	}
	h, err := w.Write(ctx, c, t.op)
	if err != nil {
		return err
	}
	// The write happened: record it even if ctx ended meanwhile.
	return w.Record(context.WithoutCancel(ctx), c.ID, t.op, h)
}

// Write writes c's approval (action "approve") or revocation (action
// "revoke") to the registry and returns the transaction's hash, once
// mined. Sync mode calls it before the claim moves, then Record.
func (w *Writer) Write(ctx context.Context, c Claim, action string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	if action == opApprove {
		h, err := w.backend.ApproveClaimDirect(ctx, c.Namespace, c.PublicKey, c.Service)
		if err != nil {
			return "", fmt.Errorf("controlplane: registry approve: %w", err)
		}
		return h, nil
	}
	h, err := w.backend.RevokeClaimDirect(ctx, c.Namespace, c.PublicKey, c.Service)
	if err != nil {
		return "", fmt.Errorf("controlplane: registry revoke: %w", err)
	}
	return h, nil
}

// Record records the hash of claim id's approval or revocation (action),
// once, and clears its registry error.
func (w *Writer) Record(ctx context.Context, id, action, hash string) error {
	return w.store.setTxHash(ctx, id, hashColumn(action), hash)
}

// hashColumn is the claims column that holds the hash of action's write.
func hashColumn(action string) string {
	if action == opRevoke {
		return "revocation_tx_hash"
	}
	return "approval_tx_hash"
}

// store is the writer's view of the control plane's database: what the
// registry lacks, the job rows that lease and count attempts, and the
// hashes and errors recorded on claims and namespaces.
type store struct{ db *sqldb.DB }

// registryClaimTodo is the condition of a claim (alias c) whose write the
// registry lacks.
const registryClaimTodo = `((c.status = 'approved' AND c.approval_tx_hash IS NULL)
	OR (c.status = 'revoked' AND c.approval_tx_hash IS NOT NULL AND c.revocation_tx_hash IS NULL))`

// registryTodo returns writes that are due, namespaces first. A due write
// is not given up, not waiting for a retry and not leased by a live
// worker. A claim's write also waits while an older write of its tuple is
// still owed (unless given up). So a tuple's approvals and revocations
// reach the chain in order.
func (s store) registryTodo(ctx context.Context, now time.Time, n int) ([]task, error) {
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
	var tasks []task
	for rows.Next() {
		var t task
		if err := rows.Scan(&t.subject, &t.op); err != nil {
			return nil, sqldb.Err("registry todo", err)
		}
		tasks = append(tasks, t)
	}
	return tasks, sqldb.Err("registry todo", rows.Err())
}

// registrationOwed reports whether namespace ns is active and not yet
// registered.
func (s store) registrationOwed(ctx context.Context, ns string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM namespaces
		WHERE namespace = $1 AND registration_tx_hash IS NULL AND deactivated_at IS NULL`, ns).Scan(&n)
	return n > 0, sqldb.Err("registration owed", err)
}

// jobState is the attempt state of one write.
type jobState struct {
	failed int
	queued time.Time
}

// leaseRegistryJob takes the lease of write t for leaseFor, creating its
// job row on first use. It is an atomic upsert that only succeeds when no
// live lease, retry wait or give-up stands in the way. So across instances
// sharing the database, one worker holds a write at a time. ok is false
// when the write is held, waiting or given up, or is no longer owed.
func (s store) leaseRegistryJob(ctx context.Context, t task, token string, now time.Time, leaseFor time.Duration) (jobState, bool, error) {
	var j jobState
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
func (s store) registryOwed(ctx context.Context, t task) (time.Time, bool, error) {
	var (
		at  int64
		err error
	)
	switch t.op {
	case opRegister:
		err = s.db.QueryRowContext(ctx, `SELECT created_at FROM namespaces
			WHERE namespace = $1 AND registration_tx_hash IS NULL AND deactivated_at IS NULL`, t.subject).Scan(&at)
	case opApprove:
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
func (s store) finishRegistryJob(ctx context.Context, t task, token string, werr error, next, now time.Time) error {
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
		WHERE claim_id = $1 AND op = $2 AND lease_token = $3`, t.subject, t.op, token, sqldb.Micros(next), reason(werr), failed)
	if err != nil {
		return sqldb.Err("finish registry job", err)
	}
	if n, _ := res.RowsAffected(); n == 0 || t.op == opRegister {
		return nil // the lease was lost: its new holder reports
	}
	return s.setRegistryError(ctx, t.subject, werr)
}

// reason is a write error as the owner sees it: without the
// package prefixes, at most 500 bytes.
func reason(err error) string {
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
func (s store) setRegistryError(ctx context.Context, id string, werr error) error {
	_, err := s.db.Exec(ctx, `UPDATE claims SET registry_error = $2 WHERE id = $1`, id, reason(werr))
	return sqldb.Err("record registry error", err)
}

// claimByID returns a claim by id (sql.ErrNoRows when there is none).
func (s store) claimByID(ctx context.Context, id string) (Claim, error) {
	var (
		c                    Claim
		approval, revocation sql.NullString
	)
	err := s.db.QueryRowContext(ctx, `SELECT id, namespace, public_key, service, status, approval_tx_hash, revocation_tx_hash
		FROM claims WHERE id = $1`, id).Scan(&c.ID, &c.Namespace, &c.PublicKey, &c.Service, &c.Status, &approval, &revocation)
	c.ApprovalTxHash, c.RevocationTxHash = approval.String, revocation.String
	if errors.Is(err, sql.ErrNoRows) {
		return c, err
	}
	return c, sqldb.Err("claim", err)
}

// setTxHash records a registry transaction hash on a claim, once, and
// clears its registry error.
func (s store) setTxHash(ctx context.Context, id, column, hash string) error {
	_, err := s.db.Exec(ctx, `UPDATE claims SET `+column+` = $2, registry_error = NULL WHERE id = $1 AND `+column+` IS NULL`, id, hash)
	return sqldb.Err("record tx hash", err)
}

// setRegistrationHash records the registration of namespace ns, once.
func (s store) setRegistrationHash(ctx context.Context, ns, hash string) error {
	_, err := s.db.Exec(ctx, `UPDATE namespaces SET registration_tx_hash = $2 WHERE namespace = $1 AND registration_tx_hash IS NULL`, ns, hash)
	return sqldb.Err("record registration hash", err)
}

// Backlog is the state of the registry writes a database owes.
type Backlog struct {
	Owed     int       // writes not yet on chain, given-up ones excluded
	Retrying int       // of those, failed at least once and waiting for a retry
	GivenUp  int       // writes that failed MaxAttempts times
	Oldest   time.Time // when the oldest owed write became owed; zero when none
	// LastErrors are the reasons of up to 5 failed writes, newest first.
	LastErrors []string
}

// ReadBacklog reads what registry writes db owes (as `controlplane
// registry status` shows).
func ReadBacklog(ctx context.Context, db *sqldb.DB) (Backlog, error) {
	s := store{db}
	var (
		q      Backlog
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

// Describe and Collect make the Writer a Prometheus collector of its
// queue: the in-process queue in memory mode, the database's otherwise.
func (w *Writer) Describe(ch chan<- *prometheus.Desc) {
	ch <- registryOwedDesc
	ch <- registryScrapeErrorDesc
}

func (w *Writer) Collect(ch chan<- prometheus.Metric) {
	var due, retrying, givenUp float64
	failed := 0.0
	if w.mode == Memory {
		w.mu.Lock()
		for _, j := range w.pending {
			if j.failed > 0 {
				retrying++
			} else {
				due++
			}
		}
		w.mu.Unlock()
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		q, err := ReadBacklog(ctx, w.store.db)
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
