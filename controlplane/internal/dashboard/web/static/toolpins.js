// An MCP connection's pinned tools on the gateway page: the definitions
// that changed since the owner approved them, or are new, waiting for
// review with what changed, and Accept or Reject for each. The gateway
// hides them from agents until accepted; a decision names the hash
// reviewed, so a server that changes the tool again meanwhile has nothing
// decided unseen. A rejected definition stays hidden and is not offered
// again while the server lists it.
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

// rejections lists the definitions the owner rejected, which the
// gateway keeps hidden while the server lists them.
function rejections(rejected) {
  if (!rejected.length) return [];
  const list = el('ul', {}, ...rejected.map((r) => el('li', { dataset: { rejected: r.name } },
    el('code', {}, shown(r.name)), ` rejected by ${shown(r.rejected_by)} ${utc(r.rejected_at)} · ${r.sha256.slice(0, 19)}…`)));
  return [el('p', { className: 'hint' }, `Rejected definitions stay hidden from agents and are not offered again while the server lists them; a further change is.`), list];
}

// renderPins shows pins (the gateway's tool-pins answer) of the
// connection named name in host; decide(verb, name, sha256, button)
// accepts or rejects one, verb being 'Accept' or 'Reject'.
export function renderPins(host, name, pins, decide) {
  const pending = pins?.pending ?? [];
  const rejected = pins?.rejected ?? [];
  const parts = [el('h4', { id: 'pins-h', tabIndex: -1 }, pending.length ? 'Changes waiting for review' : 'Tool definitions')];
  if (!pending.length) {
    parts.push(el('p', { className: 'summary' }, rejected.length
      ? `${pins?.pinned?.length ?? 0} tools of ${name} are pinned as approved. Agents do not see a tool while its server lists a definition you rejected.`
      : `All ${pins?.pinned?.length ?? 0} tools of ${name} are as approved; agents see them as listed above.`), ...rejections(rejected));
    host.replaceChildren(...parts);
    mark(pending, rejected);
    return;
  }
  parts.push(el('p', { className: 'note', role: 'note' },
    `${name}'s server changed ${pending.length === 1 ? 'a tool since it was' : `${pending.length} tools since they were`} approved. Agents do not see ` +
    `${pending.length === 1 ? 'it' : 'them'}, and calls are refused (MCP_TOOL_CHANGED), until you accept. Read what changed first: ` +
    'a description can carry instructions for the agent, a schema can take what it refused. ' +
    'Reject keeps the tool hidden and stops offering this definition.'));
  for (const p of pending) {
    const button = (verb, kind) => {
      const b = el('button', { type: 'button', className: `${kind} small`, textContent: verb, 'aria-label': `${verb} ${shown(p.name)}` });
      b.addEventListener('click', () => decide(verb, p.name, p.sha256, b));
      return b;
    };
    parts.push(el('article', { className: 'pin', dataset: { pending: p.name } },
      el('h5', {}, el('code', {}, shown(p.name)), ' ', el('span', { className: 'badge pending' }, p.change === 'new' ? 'new tool' : 'changed')),
      el('p', { className: 'muted' }, `Seen ${utc(p.seen_at)} · ${p.sha256.slice(0, 19)}…`),
      changes(p),
      el('div', { className: 'act' }, button('Accept', 'secondary'), ' ', button('Reject', 'danger'))));
  }
  host.replaceChildren(...parts, ...rejections(rejected));
  mark(pending, rejected);
}

// mark badges the tools listed above, which are the server's, that
// agents may not get: those waiting for review, and those with a
// rejected definition. A decision's answer replaces the badges.
function mark(pending, rejected) {
  const waiting = new Set(pending.map((p) => p.name));
  const refused = new Set(rejected.map((r) => r.name));
  for (const row of document.querySelectorAll('#tools tr[data-tool]')) {
    for (const b of row.querySelectorAll('[data-pin-badge]')) {
      b.previousSibling?.remove(); // the space before it
      b.remove();
    }
    const text = waiting.has(row.dataset.tool) ? 'waiting for review' : refused.has(row.dataset.tool) ? 'definition rejected' : '';
    if (text) row.cells[0].firstChild.append(' ', el('span', { className: 'badge pending', dataset: { pinBadge: '' } }, text));
  }
}
