// Messages beside the controls that caused them, shared by the dashboard's
// modules so every message on a page has its own id, and spoken through
// the page's two live regions (layout.html): one polite for what an
// action did, one assertive for what went wrong. The messages beside the
// controls are not live themselves, so a screen reader hears each once.
import { successor } from './focus.js';

let messages = 0;

// announce says text through the page's polite live region, or its
// assertive one when kind is "err". Each message is a new node, so the
// same words said twice are heard twice.
export function announce(text, kind) {
  const region = document.getElementById(kind === 'err' ? 'live-alert' : 'live-status');
  if (!region || !text) return;
  const p = document.createElement('p');
  p.textContent = text;
  region.replaceChildren(p);
}

// feedback shows text (kind "err" or "done") next to control and
// announces it, or clears it, and the live regions with it, as a new
// action starts; ref, when given, is a smaller line naming the error for
// a report. An answer that arrives after a re-render replaced control
// is shown beside the control that took its place.
export function feedback(control, text, kind, ref) {
  control = successor(control);
  const host = control.closest('.act') ?? control.parentElement;
  let p = host.querySelector(':scope > .err, :scope > .done');
  if (!text) {
    p?.remove();
    control.removeAttribute('aria-describedby');
    for (const id of ['live-status', 'live-alert']) document.getElementById(id)?.replaceChildren();
    return;
  }
  if (!p) {
    p = document.createElement('p');
    p.id = `msg-${++messages}`;
    host.append(p);
  }
  p.className = kind;
  p.textContent = text;
  p.dataset.at = String(performance.now());
  if (ref) {
    const small = document.createElement('small');
    small.textContent = ref;
    p.append(small);
  }
  control.setAttribute('aria-describedby', p.id);
  announce(text, kind);
}

// replaceKeeping replaces host's children with nodes drawn from data read
// from time asked (performance.now()) on. The messages shown beside
// host's controls since then are newer than that data, so they stay,
// beside the controls that took their places.
export function replaceKeeping(host, asked, ...nodes) {
  const kept = [...host.querySelectorAll('p.err, p.done')]
    .filter((p) => Number(p.dataset.at) >= asked)
    .map((p) => [p, host.querySelector(`[aria-describedby="${p.id}"]`)])
    .filter(([, control]) => control);
  host.replaceChildren(...nodes);
  for (const [p, control] of kept) {
    const next = successor(control);
    if (next === control) continue;
    (next.closest('.act') ?? next.parentElement).append(p);
    next.setAttribute('aria-describedby', p.id);
  }
}
