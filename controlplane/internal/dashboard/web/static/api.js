// The control plane's JSON API, as the dashboard calls it: same-origin
// fetches with the session cookie, and errors turned into readable text.

import * as errcode from './errcode.js';

export class ApiError extends Error {
  constructor(status, code, message, requestId, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
    this.details = details;
  }
}

// base is the path the control plane is mounted under ("" at the root),
// which every path of the API and the dashboard starts with.
export const base = document.body?.dataset.base ?? '';

// call sends method path with an optional JSON body and returns the decoded
// answer (null for 204). An error answer throws an ApiError carrying the
// envelope's code, message and request id.
export async function call(method, path, body) {
  const init = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(base + path, init);
  } catch {
    throw new ApiError(0, 'NETWORK_ERROR', 'The control plane could not be reached. Check the connection and try again.');
  }
  if (res.status === 204) return null;
  let data = null;
  try { data = await res.json(); } catch { /* not JSON: described below */ }
  if (!res.ok) {
    const e = new ApiError(res.status, data?.code ?? `HTTP_${res.status}`, data?.error ?? (res.statusText || 'request failed'),
      data?.request_id ?? res.headers.get('X-Request-Id') ?? '', data?.details);
    e.retryAfter = res.headers.get('Retry-After');
    throw e;
  }
  return data;
}

const reasons = {
  passkey_too_new: 'The passkey you confirmed with was added less than a day ago; confirm with an older passkey.',
  credentials_changed_since_verification: 'Your passkeys changed since you last confirmed; confirm again.',
  verifying_passkey_removed: 'The passkey you confirmed with has been removed; confirm with another one.',
};

// reference names an API error for a report: its code and request id.
export function reference(err) {
  if (!(err instanceof ApiError)) return '';
  return err.requestId ? `${err.code} · request ${err.requestId}` : err.code;
}

// describe turns any error into one readable sentence for the page.
export function describe(err) {
  if (err instanceof ApiError) {
    let text = err.message ? err.message[0].toUpperCase() + err.message.slice(1).replace(/\.$/, '') : 'The request failed';
    if (err.code === errcode.ADMIN_UNAUTHORIZED) text = 'Your session has ended: log in again';
    const reason = err.details?.reason;
    if (reason) text += reasons[reason] ? `. ${reasons[reason]}` : ` (${reason})`;
    if (err.retryAfter) text += `. Try again in ${err.retryAfter} s`;
    return /[.!?]$/.test(text) ? text : `${text}.`;
  }
  if (err?.name === 'NotAllowedError') return 'The passkey prompt was dismissed or timed out. Try again.';
  if (err?.name === 'InvalidStateError') return 'This authenticator already holds a passkey of this account; use another one.';
  if (err?.name === 'SecurityError') return 'Passkeys do not work on this address: open the dashboard at its configured origin.';
  return err?.message || String(err);
}
