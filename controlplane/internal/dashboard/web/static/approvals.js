// Owner approval rules in the connection forms: the routes (HTTP) or
// tools (MCP) whose calls wait for the owner's passkey, and the rules a
// subject adds for its own calls. The gateway checks them again; its
// reasons are shown as it gives them. It takes a new rule from the
// dashboard but refuses to drop one (ADMIN_TOKEN_REQUIRED): lifting a
// hold would let through calls only the owner's passkey may release, so
// the gateway's operator does it with the admin token.
import { el } from './dom.js';
import { patterns } from './mcp.js';

// routesOf splits routes the owner typed: one a line, or separated by
// commas, since a route holds a space ("POST /v1/payments").
const routesOf = (text) => String(text ?? '').split(/[\n,]+/).map((r) => r.trim().replace(/\s+/g, ' ')).filter((r) => r !== '');

const isMCP = (form) => form.elements.protocol?.value === 'mcp';

// folded is how the gateway compares subjects: trimmed, case folded.
const folded = (s) => s.trim().toUpperCase().toLowerCase();

// showApprovals shows the list form's protocol takes: tools for MCP,
// routes for HTTP, in the connection's rules and each subject's.
export function showApprovals(form) {
  const mcp = isMCP(form);
  for (const part of form.querySelectorAll('[data-approval-http]')) part.hidden = mcp;
  for (const part of form.querySelectorAll('[data-approval-mcp]')) part.hidden = !mcp;
  for (const label of form.querySelectorAll('[data-approval-kind]')) label.textContent = mcp ? 'Tools' : 'Routes';
  for (const area of form.querySelectorAll('[name=approval_subject_rules]')) area.placeholder = mcp ? 'e.g. payments.*' : 'e.g. POST /v1/payments';
}

let rows = 0;

// addApprovalSubject appends a subject's rule fields to form and returns
// its subject field.
export function addApprovalSubject(form, subject = '', rules = []) {
  const host = form.querySelector('[data-approval-subjects]');
  const id = `approval-subject-${++rows}`;
  const remove = el('button', { type: 'button', className: 'danger small', textContent: 'Remove' });
  const row = el('fieldset', { className: 'subject', dataset: { approvalSubject: '' } }, el('legend', {}),
    el('div', { className: 'field' }, el('label', { htmlFor: `${id}-subject` }, 'Held subject ', el('span', { className: 'muted' }, '(idn-subject)')),
      el('input', { id: `${id}-subject`, name: 'approval_subject', value: subject, autocapitalize: 'none', spellcheck: false })),
    el('div', { className: 'field' }, el('label', { htmlFor: `${id}-rules` }, el('span', { dataset: { approvalKind: '' } }, 'Routes'),
      ' ', el('span', { className: 'muted' }, '(one a line)')),
    el('textarea', { id: `${id}-rules`, name: 'approval_subject_rules', rows: 2, value: rules.join('\n'), autocapitalize: 'none', spellcheck: false })),
    el('div', {}, remove));
  remove.addEventListener('click', () => {
    row.remove();
    number(form);
    form.querySelector('[data-add-approval-subject]').focus();
  });
  host.append(row);
  number(form);
  showApprovals(form);
  return row.querySelector('input');
}

// number names each subject's rules by their place, for the legend and
// the Remove button.
function number(form) {
  form.querySelectorAll('[data-approval-subject]').forEach((row, i) => {
    row.querySelector('legend').textContent = `Subject rule ${i + 1}`;
    row.querySelector('button').setAttribute('aria-label', `Remove subject rule ${i + 1}`);
  });
}

// fillApprovals writes connection c's approval rules into form.
export function fillApprovals(form, c) {
  form.elements.approval_routes.value = (c.approval_routes ?? []).join('\n');
  form.elements.approval_tools.value = (c.approval_tools ?? []).join('\n');
  form.querySelector('[data-approval-subjects]').replaceChildren();
  for (const [subject, r] of Object.entries(c.approval_subjects ?? {})) addApprovalSubject(form, subject, [...(r.approval_tools ?? []), ...(r.approval_routes ?? [])]);
  showApprovals(form);
}

// clearApprovals removes form's subject rules, which a reset leaves.
export function clearApprovals(form) {
  form.querySelector('[data-approval-subjects]').replaceChildren();
  showApprovals(form);
}

// readApprovals returns form's approval rules as the admin API takes
// them, for its protocol: the other protocol's list is empty. An empty
// list is left out, or sent as null (which clears it) when clear is set.
// A subject rule without a subject or a rule, or a subject named twice,
// is refused with the reason.
export function readApprovals(form, clear) {
  const mcp = isMCP(form);
  const out = {};
  const put = (name, v) => {
    if (v !== null) out[name] = v;
    else if (clear) out[name] = null;
  };
  const some = (l) => (l.length ? l : null);
  put('approval_tools', some(mcp ? patterns(form.elements.approval_tools.value) : []));
  put('approval_routes', some(mcp ? [] : routesOf(form.elements.approval_routes.value)));
  const kind = mcp ? 'approval_tools' : 'approval_routes';
  // A Map: a subject may be any name, "__proto__" too.
  const subjects = new Map();
  const seen = new Map();
  form.querySelectorAll('[data-approval-subject]').forEach((row, i) => {
    const subject = row.querySelector('[name=approval_subject]').value.trim();
    const text = row.querySelector('[name=approval_subject_rules]').value;
    const rules = mcp ? patterns(text) : routesOf(text);
    if (!subject && !rules.length) return;
    if (!subject) throw new Error(`Subject rule ${i + 1} needs a subject.`);
    if (!rules.length) throw new Error(`Subject rule ${i + 1} (${subject}) needs at least one ${mcp ? 'tool' : 'route'}.`);
    const other = seen.get(folded(subject));
    if (other !== undefined) throw new Error(`${other} and ${subject} are the same subject (case is not significant); merge their rules into one.`);
    seen.set(folded(subject), subject);
    subjects.set(subject, { [kind]: rules });
  });
  put('approval_subjects', subjects.size ? Object.fromEntries(subjects) : null);
  return out;
}
