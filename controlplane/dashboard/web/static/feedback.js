// Messages beside the controls that caused them, shared by the dashboard's
// modules so every message on a page has its own id, and spoken through
// the page's two live regions (layout.html): one polite for what an
// action did, one assertive for what went wrong. The messages beside the
// controls are not live themselves, so a screen reader hears each once.
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
// a report.
export function feedback(control, text, kind, ref) {
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
  if (ref) {
    const small = document.createElement('small');
    small.textContent = ref;
    p.append(small);
  }
  control.setAttribute('aria-describedby', p.id);
  announce(text, kind);
}
