// The error envelope both idn servers answer with, as a typed error, and
// waiting for an owner's approval.

/** The code of the answer that files a claim for the owner to approve. */
export const CLAIM_REQUIRED = "AUTH_CLAIM_REQUIRED";

/** The code of the answer that holds a call for the owner's passkey approval of that very call. */
export const ACTION_APPROVAL_REQUIRED = "AUTH_ACTION_APPROVAL_REQUIRED";

/** The response header with which idn servers mark their own envelopes (its value is the code). */
export const MARK_HEADER = "idn-error";

/** Codes that clear by themselves: waitForApproval retries them too. */
const TRANSIENT = new Set(["AUTH_CLAIMS_UNAVAILABLE", "AUTH_REPLAY_DETECTED", "NONCE_REPLAY"]);

/** Codes, and claim statuses, after which waiting cannot help: the owner said no. */
const REFUSED = new Set(["AUTH_CLAIM_REJECTED", "AUTH_CLAIM_REVOKED", "AUTH_ACTION_DENIED"]);
const REFUSED_STATUS = new Set(["rejected", "revoked"]);

// The key fingerprint of the identity that signed the request a response
// answers, noted by idnFetch (a fetch Response does not carry its request).
const signers = new WeakMap<Response, string>();

/** Notes that identity's key signed the request response answers. */
export function noteSigner(response: Response, fingerprint: string): void {
  signers.set(response, fingerprint);
}

/**
 * An error answer of a gateway or control plane: the JSON envelope
 * {"error","code","request_id","timestamp",…} with the HTTP status.
 *
 * Only an envelope the idn server marked as its own (the Idn-Error header
 * naming the same code) gives its code and claim: an upstream behind the
 * gateway can answer any body, and a forged AUTH_CLAIM_REQUIRED with
 * another key's claim id must not reach the owner. Anything else reads as
 * code "HTTP_<status>", with the body still in envelope.
 */
export class IdnError extends Error {
  /** The stable code, e.g. "AUTH_CLAIM_REQUIRED"; "HTTP_<status>" when the answer is not an idn envelope. */
  readonly code: string;
  readonly status: number;
  /** True when an idn server wrote the envelope (Idn-Error names its code). */
  readonly fromIdn: boolean;
  /** The request id (the envelope's request_id or the X-Request-Id header). */
  readonly requestId: string | undefined;
  /** The claim the gateway filed (AUTH_CLAIM_REQUIRED). */
  readonly claimId: string | undefined;
  /** That claim's status, e.g. "pending". */
  readonly claimStatus: string | undefined;
  /** The action the gateway filed (AUTH_ACTION_APPROVAL_REQUIRED, AUTH_ACTION_DENIED). */
  readonly actionId: string | undefined;
  /** When that action expires (RFC 3339). */
  readonly expiresAt: string | undefined;
  /** Seconds from the Retry-After header (delta-seconds or an HTTP date), if any. */
  readonly retryAfter: number | undefined;
  /**
   * The fingerprint of the key that signed the refused request,
   * "ed25519-<16 hex>", as the owner's claims page shows it (known for
   * answers to idnFetch); an owner approves a claim only when they match.
   */
  readonly keyFingerprint: string | undefined;
  /** The decoded JSON body (undefined when it was not a JSON object). */
  readonly envelope: Record<string, unknown> | undefined;

  constructor(status: number, envelope: Record<string, unknown> | undefined, headers?: Headers, keyFingerprint?: string) {
    const str = (k: string) => (typeof envelope?.[k] === "string" ? (envelope[k] as string) : undefined);
    const claimed = str("code");
    const fromIdn = claimed !== undefined && headers?.get(MARK_HEADER) === claimed;
    const code = fromIdn ? claimed : `HTTP_${status}`;
    super(`${code} (${status}): ${fromIdn ? (str("error") ?? "") : "not an idn error envelope"}`);
    this.name = "IdnError";
    this.code = code;
    this.status = status;
    this.fromIdn = fromIdn;
    this.requestId = (fromIdn ? str("request_id") : undefined) ?? headers?.get("x-request-id") ?? undefined;
    this.claimId = fromIdn ? str("claim_id") : undefined;
    this.claimStatus = fromIdn ? str("claim_status") : undefined;
    this.actionId = fromIdn ? str("action_id") : undefined;
    this.expiresAt = fromIdn ? str("expires_at") : undefined;
    this.retryAfter = parseRetryAfter(headers?.get("retry-after") ?? null, Date.now());
    this.keyFingerprint = keyFingerprint;
    this.envelope = envelope;
  }

  /** True when the agent waits for an owner's approval (a claim was filed). */
  get claimRequired(): boolean {
    return this.code === CLAIM_REQUIRED;
  }

  /** True when the call waits for the owner's passkey approval of this very call. */
  get actionRequired(): boolean {
    return this.code === ACTION_APPROVAL_REQUIRED;
  }

  /** True when the owner rejected or revoked the claim, or denied the action: waiting cannot help. */
  get claimRefused(): boolean {
    return REFUSED.has(this.code) || (this.claimRequired && REFUSED_STATUS.has(this.claimStatus ?? ""));
  }
}

/**
 * Seconds a Retry-After value asks for: delta-seconds (ASCII digits only)
 * or an HTTP date (seconds from now, at least 0); undefined for anything else.
 */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  if (/^[0-9]+$/.test(v)) return Number(v);
  if (/^[A-Za-z]{3}, [0-9]{2} [A-Za-z]{3} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$/.test(v)) {
    const at = Date.parse(v);
    if (!Number.isNaN(at)) return Math.max(0, Math.ceil((at - now) / 1000));
  }
  return undefined;
}

/**
 * Reads a response as an IdnError: undefined for a 2xx or 3xx answer, else
 * the error (the body is read from a clone, so the response stays readable).
 */
export async function readError(response: Response): Promise<IdnError | undefined> {
  if (response.status < 400) return undefined;
  let envelope: Record<string, unknown> | undefined;
  try {
    const v = await response.clone().json();
    if (v && typeof v === "object" && !Array.isArray(v)) envelope = v as Record<string, unknown>;
  } catch {
    envelope = undefined;
  }
  return new IdnError(response.status, envelope, response.headers, signers.get(response));
}

/** Returns the response when it is not an error, else throws its IdnError. */
export async function throwIfError(response: Response): Promise<Response> {
  const err = await readError(response);
  if (err) throw err;
  return response;
}

/** Options of waitForApproval. */
export interface WaitOptions {
  /** Give up after this many milliseconds (default 10 minutes). */
  timeoutMs?: number;
  /** The first pause between tries (default 1000 ms); it doubles up to maxDelayMs. */
  initialDelayMs?: number;
  /** The longest pause (default 30000 ms). */
  maxDelayMs?: number;
  /**
   * Called once, when the first refusal names the claim: show the owner the
   * claim id and error.keyFingerprint, the key their claims page should show.
   */
  onClaim?: (claimId: string, error: IdnError) => void;
  /**
   * Called with each new action the gateway holds for the owner's passkey
   * approval: tell the owner its id and error.expiresAt.
   */
  onAction?: (actionId: string, error: IdnError) => void;
  /** Stops waiting (the promise rejects with the signal's reason). */
  signal?: AbortSignal;
}

/**
 * Calls attempt until its answer is not "claim required": the first refusal
 * files a claim; the gateway remembers it, so every later try reuses the
 * same claim id until the owner approves. Pauses grow from initialDelayMs
 * to maxDelayMs (or follow Retry-After). Answers that clear by themselves
 * (AUTH_CLAIMS_UNAVAILABLE) are retried too. Returns the first answer that
 * is not one of those — success or another error, for the caller to read.
 * Throws the IdnError at once when the owner rejected or revoked the claim
 * (AUTH_CLAIM_REJECTED, AUTH_CLAIM_REVOKED), and the last one when the
 * deadline passes. Only envelopes an idn server marked count. attempt must
 * send a freshly signed request each time (a signing fetch does).
 *
 * A call held for the owner's passkey approval (AUTH_ACTION_APPROVAL_REQUIRED)
 * is waited on the same way, with onAction told of each new action, and
 * AUTH_ACTION_DENIED ends the wait. attempt must send the same call each
 * time: an approval holds for that call (body, subject) only.
 */
export async function waitForApproval(attempt: () => Promise<Response>, options: WaitOptions = {}): Promise<Response> {
  const deadline = Date.now() + (options.timeoutMs ?? 600_000);
  let delay = options.initialDelayMs ?? 1000;
  const maxDelay = options.maxDelayMs ?? 30_000;
  let claimId: string | undefined;
  let actionId: string | undefined;
  for (;;) {
    options.signal?.throwIfAborted();
    const response = await attempt();
    const err = await readError(response);
    if (err?.claimRefused) {
      await response.body?.cancel();
      throw err;
    }
    if (!err || !(err.claimRequired || err.actionRequired || TRANSIENT.has(err.code))) return response;
    if (err.claimId && claimId === undefined) {
      claimId = err.claimId;
      options.onClaim?.(claimId, err);
    }
    if (err.actionId && err.actionId !== actionId) {
      actionId = err.actionId;
      options.onAction?.(actionId, err);
    }
    await response.body?.cancel();
    const pause = Math.min(err.retryAfter !== undefined ? err.retryAfter * 1000 : delay, maxDelay);
    if (Date.now() + pause > deadline) throw err;
    await sleep(pause, options.signal);
    delay = Math.min(delay * 2, maxDelay);
  }
}

/** Resolves after ms, or rejects with signal's reason when it aborts. */
export function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener("abort", abort);
      resolve();
    }
    function abort() {
      clearTimeout(t);
      reject(signal!.reason);
    }
    signal?.addEventListener("abort", abort, { once: true });
  });
}
