// The error envelope both idn servers answer with, as a typed error, and
// waiting for an owner's approval.

/** The code of the answer that files a claim for the owner to approve. */
export const CLAIM_REQUIRED = "AUTH_CLAIM_REQUIRED";

/** Codes that clear by themselves: waitForApproval retries them too. */
const TRANSIENT = new Set(["AUTH_CLAIMS_UNAVAILABLE", "AUTH_REPLAY_DETECTED", "NONCE_REPLAY"]);

/**
 * An error answer of a gateway or control plane: the JSON envelope
 * {"error","code","request_id","timestamp",…} with the HTTP status.
 */
export class IdnError extends Error {
  /** The stable code, e.g. "AUTH_CLAIM_REQUIRED"; "HTTP_<status>" when the body is not an envelope. */
  readonly code: string;
  readonly status: number;
  /** The request id (the envelope's request_id or the X-Request-Id header). */
  readonly requestId: string | undefined;
  /** The claim the gateway filed (AUTH_CLAIM_REQUIRED). */
  readonly claimId: string | undefined;
  /** That claim's status, e.g. "pending". */
  readonly claimStatus: string | undefined;
  /** Seconds from the Retry-After header, if any. */
  readonly retryAfter: number | undefined;
  /** The whole decoded envelope (undefined when the body was not JSON). */
  readonly envelope: Record<string, unknown> | undefined;

  constructor(status: number, envelope: Record<string, unknown> | undefined, headers?: Headers) {
    const str = (k: string) => (typeof envelope?.[k] === "string" ? (envelope[k] as string) : undefined);
    const code = str("code") ?? `HTTP_${status}`;
    super(`${code} (${status}): ${str("error") ?? "no error envelope"}`);
    this.name = "IdnError";
    this.code = code;
    this.status = status;
    this.requestId = str("request_id") ?? headers?.get("x-request-id") ?? undefined;
    this.claimId = str("claim_id");
    this.claimStatus = str("claim_status");
    const ra = headers?.get("retry-after");
    this.retryAfter = ra && /^\d+$/.test(ra) ? Number(ra) : undefined;
    this.envelope = envelope;
  }

  /** True when the agent waits for an owner's approval (a claim was filed). */
  get claimRequired(): boolean {
    return this.code === CLAIM_REQUIRED;
  }
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
  return new IdnError(response.status, envelope, response.headers);
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
  /** Called once, with the claim id, when the first refusal names the claim (show it to the owner). */
  onClaim?: (claimId: string, error: IdnError) => void;
  /** Stops waiting (the promise rejects with the signal's reason). */
  signal?: AbortSignal;
}

/**
 * Calls attempt until its answer is not "claim required": the first refusal
 * files a claim; the gateway remembers it, so every later try reuses the
 * same claim id until the owner approves. Pauses grow from initialDelayMs
 * to maxDelayMs (or follow Retry-After). Answers that clear by themselves
 * (AUTH_CLAIMS_UNAVAILABLE) are retried too. Returns the first answer that
 * is not one of those — success or another error, for the caller to read —
 * and throws the last IdnError when the deadline passes. attempt must send
 * a freshly signed request each time (a signing fetch does).
 */
export async function waitForApproval(attempt: () => Promise<Response>, options: WaitOptions = {}): Promise<Response> {
  const deadline = Date.now() + (options.timeoutMs ?? 600_000);
  let delay = options.initialDelayMs ?? 1000;
  const maxDelay = options.maxDelayMs ?? 30_000;
  let claimId: string | undefined;
  for (;;) {
    options.signal?.throwIfAborted();
    const response = await attempt();
    const err = await readError(response);
    if (!err || !(err.claimRequired || TRANSIENT.has(err.code))) return response;
    if (err.claimId && claimId === undefined) {
      claimId = err.claimId;
      options.onClaim?.(claimId, err);
    }
    await response.body?.cancel();
    const pause = Math.min(err.retryAfter !== undefined ? err.retryAfter * 1000 : delay, maxDelay);
    if (Date.now() + pause > deadline) throw err;
    await sleep(pause, options.signal);
    delay = Math.min(delay * 2, maxDelay);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
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
