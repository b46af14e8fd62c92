// An MCP connection's pinned tools on the gateway page: the definitions
// that changed since the owner approved them, or are new, waiting for
// review with what changed, and Accept for each. The gateway hides them
// from agents until then; accepting names the hash reviewed, so a
// server that changes the tool again meanwhile has nothing accepted.
import { shown } from './display.js';
import { el } from './dom.js';

const utc = (t) => (t ? `${t.replace('T', ' ').slice(0, 16)} UTC` : '');

// text shows s whole, line by line, every hidden character of each
// line escaped: the server wrote it, and an instruction hidden in it is
// what the owner is looking for.
const text = (s) => String(s).split('\n').map(shown).join('\n');

// value shows one side of a change: a string as its text, anything else
// as indented JSON.
function value(raw) {
  if (raw === undefined) return el('span', { className: 'muted' }, '(none)');
  const v = typeof raw === 'string' ? raw : JSON.stringify(raw, null, 2);
  return el('pre', { className: 'change' }, text(v));
}

// changes is a waiting definition's diff, or a new tool's definition.
function changes(p) {
  if (p.change === 'new') {
    return el('div', {}, el('p', {}, 'A new tool. Its whole definition:'), el('pre', { className: 'change' }, text(JSON.stringify(p.definition, null, 2))));
  }
  const t = el('table', { className: 'cards diff' });
  const head = t.createTHead().insertRow();
  for (const h of ['What', 'Approved', 'Now']) head.append(el('th', { scope: 'col' }, h));
  const body = t.createTBody();
  for (const c of p.diff ?? []) {
    body.append(el('tr', {},
      el('td', { className: 'wrap', dataset: { label: 'What' } }, el('code', {}, shown(c.path))),
      el('td', { className: 'wrap', dataset: { label: 'Approved' } }, value(c.before)),
      el('td', { className: 'wrap', dataset: { label: 'Now' } }, value(c.after))));
  }
  return t;
}

// renderPins shows pins (the gateway's tool-pins answer) of the
// connection named name in host; accept(name, sha256, button) accepts one.
export function renderPins(host, name, pins, accept) {
  const pending = pins?.pending ?? [];
  const parts = [el('h4', { id: 'pins-h', tabIndex: -1 }, pending.length ? 'Changes waiting for review' : 'Tool definitions')];
  if (!pending.length) {
    parts.push(el('p', { className: 'summary' },
      `All ${pins?.pinned?.length ?? 0} tools of ${name} are as approved; agents see them as listed above.`));
    host.replaceChildren(...parts);
    return;
  }
  parts.push(el('p', { className: 'note', role: 'note' },
    `${name}'s server changed ${pending.length === 1 ? 'a tool since it was' : `${pending.length} tools since they were`} approved. Agents do not see ` +
    `${pending.length === 1 ? 'it' : 'them'}, and calls are refused (MCP_TOOL_CHANGED), until you accept. Read what changed first: ` +
    'a description can carry instructions for the agent, a schema can take what it refused.'));
  for (const p of pending) {
    const b = el('button', { type: 'button', className: 'secondary small', textContent: 'Accept', 'aria-label': `Accept ${shown(p.name)}` });
    b.addEventListener('click', () => accept(p.name, p.sha256, b));
    parts.push(el('article', { className: 'pin', dataset: { pending: p.name } },
      el('h5', {}, el('code', {}, shown(p.name)), ' ', el('span', { className: 'badge pending' }, p.change === 'new' ? 'new tool' : 'changed')),
      el('p', { className: 'muted' }, `Seen ${utc(p.seen_at)} · ${p.sha256.slice(0, 19)}…`),
      changes(p),
      el('div', { className: 'act' }, b)));
  }
  host.replaceChildren(...parts);
  // The tools listed above are the server's; mark those agents do not get.
  const waiting = new Set(pending.map((p) => p.name));
  for (const row of document.querySelectorAll('#tools tr[data-tool]')) {
    if (waiting.has(row.dataset.tool)) row.cells[0].firstChild.append(' ', el('span', { className: 'badge pending' }, 'waiting for review'));
  }
}
