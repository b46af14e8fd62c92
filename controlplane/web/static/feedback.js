// Messages beside the controls that caused them, shared by the dashboard's
// modules so every message on a page has its own id.
let messages = 0;

// feedback shows text (kind "err" or "done") next to control, or clears
// it; ref, when given, is a smaller line naming the error for a report.
export function feedback(control, text, kind, ref) {
  const host = control.closest('.act') ?? control.parentElement;
  let p = host.querySelector(':scope > .err, :scope > .done');
  if (!text) {
    p?.remove();
    control.removeAttribute('aria-describedby');
    return;
  }
  if (!p) {
    p = document.createElement('p');
    p.id = `msg-${++messages}`;
    host.append(p);
  }
  p.className = kind;
  p.setAttribute('role', kind === 'err' ? 'alert' : 'status');
  p.textContent = text;
  if (ref) {
    const small = document.createElement('small');
    small.textContent = ref;
    p.append(small);
  }
  control.setAttribute('aria-describedby', p.id);
}
