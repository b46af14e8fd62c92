package controlplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Registry is the on-chain identity registry, one method per contract
// operation of control-plane.md ("Registry contract operations"). Writes
// return the transaction hash. The control plane writes approvals with
// ApproveClaimDirect and revocations with RevokeClaimDirect (single step,
// keyed by the claim tuple); the other operations are part of the contract
// for backends and tools. A write may be repeated after a crash between the
// chain accepting it and the hash being recorded, so backends should treat
// an approval of an authorised tuple, or a revocation of an unauthorised
// one, as success.
type Registry interface {
	RegisterNamespace(ctx context.Context, name string) (txHash string, err error)
	TransferNamespace(ctx context.Context, name, newOwner string) (txHash string, err error)
	SubmitClaim(ctx context.Context, namespace, publicKey, service, agentIP string) (claimID, txHash string, err error)
	ApproveClaim(ctx context.Context, claimID string) (txHash string, err error)
	RejectClaim(ctx context.Context, claimID string) (txHash string, err error)
	RevokeClaim(ctx context.Context, claimID string) (txHash string, err error)
	ApproveClaimDirect(ctx context.Context, namespace, publicKey, service, agentIP string) (txHash string, err error)
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

// RegistryConfig selects registry writes. It lives in WebhookConfig
// because, like webhooks, it is delivery of claim changes to an outside
// system.
type RegistryConfig struct {
	// Mode is one of the Registry* constants (BLOCKCHAIN_MODE); empty means
	// RegistryDisabled.
	//
	//   - sync: the approve or revoke request writes to the registry before
	//     it answers and the claim carries the hash; a failed write is
	//     retried by RunWorkers like in queue mode.
	//   - memory: writes are queued in this process and made by RunWorkers,
	//     with retries; queued writes are lost if the process stops.
	//   - queue: RunWorkers finds the writes the registry lacks in the
	//     database (approved claims without approval_tx_hash, revoked ones
	//     with approval_tx_hash but no revocation_tx_hash), so no write is
	//     lost to a restart, and retries with backoff. Turning sync or
	//     queue on for an existing database therefore also writes the
	//     approvals made while writes were disabled.
	Mode string
	// Backend performs the writes. Required unless Mode is disabled.
	Backend Registry
	// MaxAttempts is the failed attempts after which a write is given up
	// (it stays visible as a claim without a hash); zero means 10.
	MaxAttempts int
	// RetryWindow spreads the attempts like webhook retries; zero means
	// 24 hours.
	RetryWindow time.Duration
	// Timeout bounds each backend call; zero means 30 s.
	Timeout time.Duration
}

// Registry operations recorded in registry_jobs.
const (
	registryApprove = "approve"
	registryRevoke  = "revoke"
)

// registryRunner makes the registry writes of one Server.
type registryRunner struct {
	mode      string
	backend   Registry
	store     *Store
	log       *slog.Logger
	now       func() time.Time
	threshold int
	window    time.Duration
	timeout   time.Duration
	wake      chan struct{}

	mu      sync.Mutex
	pending map[string]*memoryJob // memory mode: claim id → job
}

// memoryJob is a memory-mode write waiting for its turn.
type memoryJob struct {
	failed int
	due    time.Time
	queued time.Time
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
		return nil, fmt.Errorf("controlplane: registry mode %q needs a registry backend, and none is configured "+
			"(no EVM backend exists yet): use mode %q", c.Mode, RegistryDisabled)
	}
	if c.MaxAttempts < 0 || c.RetryWindow < 0 || c.Timeout < 0 {
		return nil, errors.New("controlplane: registry MaxAttempts, RetryWindow and Timeout must not be negative")
	}
	r := &registryRunner{mode: c.Mode, backend: c.Backend, store: st, log: log, now: now,
		threshold: c.MaxAttempts, window: c.RetryWindow, timeout: c.Timeout,
		wake: make(chan struct{}, 1), pending: map[string]*memoryJob{}}
	setDefault(&r.threshold, 10)
	setDefault(&r.window, 24*time.Hour)
	setDefault(&r.timeout, 30*time.Second)
	return r, nil
}

// claimChanged is called after a claim change has committed.
func (r *registryRunner) claimChanged(ctx context.Context, c Claim) {
	if c.Status != StatusApproved && c.Status != StatusRevoked {
		return
	}
	switch r.mode {
	case RegistrySync:
		if err := r.runLeased(ctx, c.ID); err != nil {
			r.log.ErrorContext(ctx, "registry write failed; it will be retried", "claim_id", c.ID, "err", err)
		}
	case RegistryMemory:
		r.mu.Lock()
		if _, ok := r.pending[c.ID]; !ok {
			now := r.now()
			r.pending[c.ID] = &memoryJob{due: now, queued: now}
		}
		r.mu.Unlock()
	}
	select { // the queue (or the memory queue) has work
	case r.wake <- struct{}{}:
	default:
	}
}

// runDue makes the writes that are due: the in-process queue in memory
// mode, the database's to-do list otherwise.
func (r *registryRunner) runDue(ctx context.Context) error {
	if r.mode == RegistryMemory {
		return r.runMemory(ctx)
	}
	ids, err := r.store.registryTodo(ctx, r.now(), 64)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := r.runLeased(ctx, id); err != nil {
			r.log.WarnContext(ctx, "registry write failed", "claim_id", id, "err", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

func (r *registryRunner) runMemory(ctx context.Context) error {
	now := r.now()
	r.mu.Lock()
	var due []string
	for id, j := range r.pending {
		if !j.due.After(now) {
			due = append(due, id)
		}
	}
	r.mu.Unlock()
	for _, id := range due {
		err := r.write(ctx, id)
		r.mu.Lock()
		j := r.pending[id]
		if err == nil {
			delete(r.pending, id)
		} else {
			j.failed++
			d := backoffDelay(j.failed, r.threshold, r.window)
			if d == 0 || now.Add(d).After(j.queued.Add(r.window)) {
				delete(r.pending, id)
				r.log.ErrorContext(ctx, "registry write given up", "claim_id", id, "attempts", j.failed, "err", err)
			} else {
				j.due = now.Add(d)
			}
		}
		r.mu.Unlock()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// runLeased makes the write claim id needs under a database lease, and
// records the attempt: success removes the job, failure schedules a retry
// or gives up after the threshold.
func (r *registryRunner) runLeased(ctx context.Context, id string) error {
	op, err := r.store.registryOp(ctx, id)
	if err != nil || op == "" {
		return err
	}
	token := newID("lease_")
	now := r.now()
	job, ok, err := r.store.leaseRegistryJob(ctx, id, op, token, now, 5*time.Minute)
	if err != nil || !ok {
		return err
	}
	werr := r.write(ctx, id)
	next := time.Time{}
	if werr != nil {
		if d := backoffDelay(job.failed+1, r.threshold, r.window); d != 0 && !now.Add(d).After(job.queued.Add(r.window)) {
			next = now.Add(d)
		}
	}
	if err := r.store.finishRegistryJob(context.WithoutCancel(ctx), id, op, token, werr, next, now); err != nil {
		return err
	}
	return werr
}

// write makes the one registry write claim id needs now, if any, and
// records its transaction hash. The need is read from the claim when the
// write is made, so a claim revoked before its approval was written needs
// nothing, and a revocation waits for the approval's hash.
func (r *registryRunner) write(ctx context.Context, id string) error {
	c, err := r.store.claimByID(ctx, id)
	if errors.Is(err, errClaimNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	switch {
	case c.Status == StatusApproved && c.ApprovalTxHash == "":
		h, err := r.backend.ApproveClaimDirect(ctx, c.Namespace, c.PublicKey, c.Service, c.AgentIP)
		if err != nil {
			return fmt.Errorf("controlplane: registry approve: %w", err)
		}
		// The write happened: record it even if ctx ended meanwhile.
		return r.store.setTxHash(context.WithoutCancel(ctx), id, "approval_tx_hash", h)
	case c.Status == StatusRevoked && c.ApprovalTxHash != "" && c.RevocationTxHash == "":
		h, err := r.backend.RevokeClaimDirect(ctx, c.Namespace, c.PublicKey, c.Service)
		if err != nil {
			return fmt.Errorf("controlplane: registry revoke: %w", err)
		}
		return r.store.setTxHash(context.WithoutCancel(ctx), id, "revocation_tx_hash", h)
	}
	return nil
}

// registryTodoWhere is the condition of a claim the registry lacks.
const registryTodoWhere = `((status = 'approved' AND approval_tx_hash IS NULL)
	OR (status = 'revoked' AND approval_tx_hash IS NOT NULL AND revocation_tx_hash IS NULL))`

// registryTodo returns claims whose registry write is due: not given up,
// not waiting for a retry, not leased by a live worker.
func (s *Store) registryTodo(ctx context.Context, now time.Time, n int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM claims c WHERE `+registryTodoWhere+`
		AND NOT EXISTS (SELECT 1 FROM registry_jobs j WHERE j.claim_id = c.id
			AND j.op = CASE WHEN c.status = 'approved' THEN 'approve' ELSE 'revoke' END
			AND (j.failed_at IS NOT NULL OR j.next_attempt_at > $1 OR j.lease_until > $1))
		ORDER BY updated_at LIMIT $2`, micros(now), n)
	if err != nil {
		return nil, dbErr("registry todo", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, dbErr("registry todo", err)
		}
		ids = append(ids, id)
	}
	return ids, dbErr("registry todo", rows.Err())
}

// registryOp returns the write claim id lacks ("" when none).
func (s *Store) registryOp(ctx context.Context, id string) (string, error) {
	var status string
	err := s.db.QueryRowContext(ctx, `SELECT status FROM claims WHERE id = $1 AND `+registryTodoWhere, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", dbErr("registry op", err)
	}
	if status == StatusApproved {
		return registryApprove, nil
	}
	return registryRevoke, nil
}

// registryJob is the attempt state of one write.
type registryJob struct {
	failed int
	queued time.Time
}

// leaseRegistryJob takes the lease of write (id, op) for leaseFor, creating
// its job row on first use. ok is false when another worker holds it, it
// waits for a retry, or it was given up.
func (s *Store) leaseRegistryJob(ctx context.Context, id, op, token string, now time.Time, leaseFor time.Duration) (registryJob, bool, error) {
	var (
		j      registryJob
		queued int64
	)
	err := s.db.QueryRowContext(ctx, `INSERT INTO registry_jobs (claim_id, op, attempts, next_attempt_at, lease_token, lease_until)
		VALUES ($1, $2, 0, $3, $4, $5)
		ON CONFLICT (claim_id, op) DO UPDATE SET lease_token = excluded.lease_token, lease_until = excluded.lease_until
		WHERE registry_jobs.failed_at IS NULL AND registry_jobs.next_attempt_at <= $3
			AND (registry_jobs.lease_until IS NULL OR registry_jobs.lease_until <= $3)
		RETURNING attempts, lease_token`, id, op, micros(now), token, micros(now.Add(leaseFor))).Scan(&j.failed, new(string))
	if errors.Is(err, sql.ErrNoRows) {
		return j, false, nil
	}
	if err != nil {
		return j, false, dbErr("lease registry job", err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT updated_at FROM claims WHERE id = $1`, id).Scan(&queued); err != nil {
		return j, false, dbErr("registry claim", err)
	}
	j.queued = fromMicros(queued)
	return j, true, nil
}

// finishRegistryJob records an attempt under the lease: success deletes
// the job; failure counts it and schedules next, or gives up when next is
// zero.
func (s *Store) finishRegistryJob(ctx context.Context, id, op, token string, werr error, next, now time.Time) error {
	if werr == nil {
		_, err := s.db.ExecContext(ctx, `DELETE FROM registry_jobs WHERE claim_id = $1 AND op = $2 AND lease_token = $3`, id, op, token)
		return dbErr("finish registry job", err)
	}
	var failed sql.NullInt64
	if next.IsZero() {
		failed, next = nullMicros(now), now
	}
	_, err := s.db.ExecContext(ctx, `UPDATE registry_jobs SET attempts = attempts + 1, next_attempt_at = $4, last_error = $5,
			failed_at = $6, lease_token = NULL, lease_until = NULL
		WHERE claim_id = $1 AND op = $2 AND lease_token = $3`, id, op, token, micros(next), werr.Error(), failed)
	return dbErr("finish registry job", err)
}

// claimByID returns a claim by id, whoever owns it.
func (s *Store) claimByID(ctx context.Context, id string) (Claim, error) {
	c, err := scanClaim(s.db.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, errClaimNotFound
	}
	return c, dbErr("claim", err)
}

// setTxHash records a registry transaction hash on a claim, once.
func (s *Store) setTxHash(ctx context.Context, id, column, hash string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE claims SET `+column+` = $2 WHERE id = $1 AND `+column+` IS NULL`, id, hash)
	return dbErr("record tx hash", err)
}
