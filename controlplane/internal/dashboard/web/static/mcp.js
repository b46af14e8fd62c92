// An MCP connection on the gateway page: the protocol's fields of the
// connection forms (endpoint, transport, tool policy with subject
// policies), the tools a discovery found with their hints, and what a
// test's MCP handshake said. The gateway checks every field again; what
// is checked here is what the owner can fix before sending.
import { shown } from './display.js';
import { el } from './dom.js';

// showProtocol shows form's MCP fields when its protocol is mcp; a
// secret is optional there, since an MCP server may take none.
export function showProtocol(form) {
  const mcp = form.elements.protocol?.value === 'mcp';
  for (const part of form.querySelectorAll('[data-mcp]')) part.hidden = !mcp;
  if (form.elements.secret) form.elements.secret.required = !mcp;
}

// patterns splits a list the owner typed: commas, spaces or new lines.
export const patterns = (text) => String(text ?? '').split(/[\s,]+/).filter((p) => p !== '');

let rows = 0;

// addSubject appends a subject policy's fields to form's policy and
// returns its subject field.
export function addSubject(form, subject = '', allow = [], deny = []) {
  const host = form.querySelector('[data-subjects]');
  const id = `subject-${++rows}`;
  const field = (name, label, value, hint) => el('div', { className: 'field' },
    el('label', { htmlFor: `${id}-${name}` }, label, ...(hint ? [' ', el('span', { className: 'muted' }, hint)] : [])),
    el('input', { id: `${id}-${name}`, name, value, autocapitalize: 'none', spellcheck: false }));
  const remove = el('button', { type: 'button', className: 'danger small', textContent: 'Remove' });
  const row = el('fieldset', { className: 'subject', dataset: { subject: '' } }, el('legend', {}),
    field('subject', 'Subject', subject, '(idn-subject)'),
    field('subject_allow', 'Allow', allow.join(', '), '(optional)'),
    field('subject_deny', 'Deny', deny.join(', '), '(optional)'),
    el('div', {}, remove));
  remove.addEventListener('click', () => {
    row.remove();
    number(form);
    form.querySelector('[data-add-subject]').focus();
  });
  host.append(row);
  number(form);
  return row.querySelector('input');
}

// number names each subject policy by its place, for its legend and its
// Remove button.
function number(form) {
  form.querySelectorAll('[data-subject]').forEach((row, i) => {
    row.querySelector('legend').textContent = `Subject policy ${i + 1}`;
    row.querySelector('button').setAttribute('aria-label', `Remove subject policy ${i + 1}`);
  });
}

// fillMCP writes connection c's MCP settings into form.
export function fillMCP(form, c) {
  form.elements.protocol.value = c.protocol === 'mcp' ? 'mcp' : 'http';
  form.elements.mcp_endpoint.value = c.mcp_endpoint ?? '';
  form.elements.mcp_tool_allowlist.value = (c.mcp_tool_allowlist ?? []).join('\n');
  form.elements.mcp_tool_denylist.value = (c.mcp_tool_denylist ?? []).join('\n');
  form.querySelector('[data-subjects]').replaceChildren();
  for (const [subject, p] of Object.entries(c.mcp_subject_tool_policies ?? {})) addSubject(form, subject, p.allow ?? [], p.deny ?? []);
  showProtocol(form);
}

// clearMCP empties form's MCP fields, as a form reset does, and its
// subject policies, which a reset leaves.
export function clearMCP(form) {
  form.querySelector('[data-subjects]').replaceChildren();
  showProtocol(form);
}

// readMCP returns the MCP fields of form as the admin API takes them.
// An empty field is left out, or sent as null (which clears it) when
// clear is set. A subject policy without a subject, with neither list, or
// for a subject named twice is refused with the reason.
export function readMCP(form, clear) {
  const out = {};
  const put = (name, v) => {
    if (v !== null) out[name] = v;
    else if (clear) out[name] = null;
  };
  const list = (name) => { const l = patterns(form.elements[name].value); return l.length ? l : null; };
  put('mcp_endpoint', form.elements.mcp_endpoint.value.trim() || null);
  put('mcp_transport', form.elements.mcp_transport.value);
  put('mcp_tool_allowlist', list('mcp_tool_allowlist'));
  put('mcp_tool_denylist', list('mcp_tool_denylist'));
  // A Map: a subject may be any name, "__proto__" and "constructor" too.
  const subjects = new Map();
  form.querySelectorAll('[data-subject]').forEach((row, i) => {
    const value = (name) => row.querySelector(`[name=${name}]`).value;
    const subject = value('subject').trim();
    const allow = patterns(value('subject_allow'));
    const deny = patterns(value('subject_deny'));
    if (!subject && !allow.length && !deny.length) return;
    if (!subject) throw new Error(`Subject policy ${i + 1} needs a subject.`);
    if (!allow.length && !deny.length) throw new Error(`Subject policy ${i + 1} (${subject}) needs an allow or a deny list.`);
    if (subjects.has(subject)) throw new Error(`The subject ${subject} has two policies; merge them into one.`);
    subjects.set(subject, { ...(allow.length ? { allow } : {}), ...(deny.length ? { deny } : {}) });
  });
  put('mcp_subject_tool_policies', subjects.size ? Object.fromEntries(subjects) : null);
  return out;
}

// cleared are the MCP fields set to null, which clears them: what a
// connection that leaves MCP sends.
export const cleared = () => Object.fromEntries(
  ['mcp_endpoint', 'mcp_transport', 'mcp_tool_allowlist', 'mcp_tool_denylist', 'mcp_subject_tool_policies'].map((k) => [k, null]));

// hints are a tool's annotations as readable badges: only what the
// server declared, each hint in words.
function hints(a) {
  if (!a) return [el('span', { className: 'muted' }, 'none declared')];
  const out = [];
  const badge = (text, kind = '') => out.push(el('span', { className: `badge ${kind}`.trim() }, text));
  if (a.read_only_hint) badge('read-only', 'approved');
  if (a.destructive_hint === true) badge('destructive', 'rejected');
  if (a.destructive_hint === false) badge('not destructive');
  if (a.idempotent_hint) badge('idempotent');
  if (a.open_world_hint === true) badge('open world');
  if (a.open_world_hint === false) badge('closed world');
  if (!out.length) return [el('span', { className: 'muted' }, 'none declared')];
  return out.flatMap((b, i) => (i ? [' ', b] : [b]));
}

const utc = (t) => (t ? `${t.replace('T', ' ').slice(0, 16)} UTC` : '');

// renderTools shows discovery d of the connection named name in section.
export function renderTools(section, name, d) {
  const tools = d?.tools ?? [];
  section.querySelector('h3').textContent = `Tools of ${name}`;
  const facts = [d.server_name && `${shown(d.server_name)} ${shown(d.server_version ?? '')}`.trim(),
    d.protocol_version && `MCP ${shown(d.protocol_version)}`, `${tools.length} tool${tools.length === 1 ? '' : 's'}`,
    d.discovered_at && `discovered ${utc(d.discovered_at)}`].filter(Boolean);
  const parts = [el('p', { className: 'summary' }, facts.join(' · ')),
    el('p', { className: 'hint' }, 'Hints are what the server declares about each tool; the gateway does not rely on them: the tool policy decides what agents may call.')];
  if (d.last_error) parts.push(el('p', { className: 'note', role: 'note' }, `The last discovery failed: ${shown(d.last_error)}`));
  if (tools.length) {
    const t = el('table', { className: 'cards' });
    const head = t.createTHead().insertRow();
    for (const h of ['Tool', 'Description', 'Hints']) head.append(el('th', { scope: 'col' }, h));
    const body = t.createTBody();
    for (const tool of tools) {
      const title = tool.title || tool.annotations?.title;
      body.append(el('tr', { dataset: { tool: tool.name } },
        // One element per cell: on a phone each cell is a grid of its
        // column's name and its content.
        el('td', { dataset: { label: 'Tool' } }, el('div', {}, ...(title ? [el('strong', {}, shown(title))] : []), el('code', {}, shown(tool.name)))),
        el('td', { className: 'wrap', dataset: { label: 'Description' } }, shown(String(tool.description ?? '').replace(/[\t\r\n]+/g, ' '))),
        el('td', { className: 'hints', dataset: { label: 'Hints' } }, el('div', {}, ...hints(tool.annotations)))));
    }
    parts.push(t);
  }
  section.querySelector('#tools-list').replaceChildren(...parts);
  section.hidden = false;
}

// testSaid is what a test's answer r says, for an MCP connection with
// what its handshake learned.
export function testSaid(r) {
  if (!r.ok) return `Test failed: ${shown(r.error ?? `HTTP ${r.status}`)}.`;
  const m = r.mcp;
  if (!m) return `Test passed: HTTP ${r.status} in ${r.latency_ms} ms.`;
  const server = [shown(m.server_name), shown(m.server_version)].filter(Boolean).join(' ') || 'The server';
  return `Test passed: ${server} answered MCP ${shown(m.protocol_version)} and lists ${m.tools} tool${m.tools === 1 ? '' : 's'}, in ${r.latency_ms} ms.`;
}
