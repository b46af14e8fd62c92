// The Gateways pages: pairing, and a paired gateway's connections and
// credential variables, managed through the control plane's RPC relay.
// Every secret typed here is sealed to the gateway's HPKE key (hpke.js)
// before it leaves the page; the relay never sees it in clear.
import { ApiError, base, call, describe, reference } from './api.js';
import * as errcode from './errcode.js';
import { shown, urlPieces } from './display.js';
import { el } from './dom.js';
import { announce, feedback, replaceKeeping } from './feedback.js';
import { busy, isBusy, land, placeOf, successor } from './focus.js';
import { sealSecrets } from './hpke.js';
import { renderPins } from './toolpins.js';
import { addApprovalSubject, clearApprovals, fillApprovals, readApprovals, showApprovals } from './approvals.js';
import { addSubject, clearMCP, cleared, fillMCP, readMCP, renderTools, showProtocol, testSaid } from './mcp.js';
import { accountName, connectAccount, connectForm, isOAuth, needsReconnecting, readOAuth, renderAccounts, showAuth } from './oauth.js';

const ns = document.body.dataset.namespace ?? '';
const page = document.body.dataset.page;
let rpcID = 0;

async function run(control, fn) {
  if (isBusy(control)) return;
  feedback(control, '');
  busy(control, true);
  control.setAttribute('aria-busy', 'true');
  try {
    await fn();
  } catch (err) {
    feedback(control, describe(err), 'err', reference(err));
  } finally {
    busy(control, false);
    control.removeAttribute('aria-busy');
  }
}

// RPCError is a JSON-RPC error answered by the gateway; an admin API error
// carries its envelope in data.
class RPCError extends Error {
  constructor(e) {
    super(e.data?.error ?? e.message);
    this.code = e.data?.code ?? `RPC_${e.code}`;
  }
}

// rpc calls a method of the gateway through the relay and returns its
// result.
async function rpc(gateway, method, params = {}) {
  const r = await call('POST', `/v1/gateways/${encodeURIComponent(gateway)}/rpc`, { jsonrpc: '2.0', id: ++rpcID, method, params });
  if (r.error) throw new RPCError(r.error);
  return r.result;
}

function explain(err) {
  if (err instanceof RPCError) return `${err.message[0].toUpperCase()}${err.message.slice(1).replace(/\.$/, '')}. (${err.code})`;
  return describe(err);
}

function confirmAction(text, verb) {
  const d = document.getElementById('confirm');
  d.querySelector('#confirm-title').textContent = `${verb}?`;
  d.querySelector('#confirm-text').textContent = text;
  d.querySelector('#confirm-ok').textContent = verb;
  d.returnValue = '';
  d.showModal();
  return new Promise((resolve) => d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true }));
}

function table(headers, rows) {
  const t = el('table', { className: 'cards' });
  const head = t.createTHead().insertRow();
  for (const h of headers) head.append(el('th', { scope: 'col' }, h ? h : el('span', { className: 'vh' }, 'Actions')));
  const body = t.createTBody();
  for (const r of rows) body.append(r);
  return t;
}

function cell(label, ...content) {
  return el('td', { dataset: { label } }, ...content);
}

const utc = (t) => (t ? `${t.replace('T', ' ').slice(0, 16)} UTC` : '');

// The gateway page.
const region = document.getElementById('gateway-region');
const gateway = region?.dataset.gateway;
const gatewayKey = region?.dataset.key;
let connections = [];

function actionButton(label, verb, name, onClick, danger = false) {
  const b = el('button', { type: 'button', className: danger ? 'danger small' : 'secondary small', textContent: verb, 'aria-label': `${verb} ${name}` });
  b.dataset.verb = verb;
  b.addEventListener('click', () => onClick(b));
  return b;
}

// lastTest is a connection's last_test t as the Last test column shows it.
const lastTest = (t) => (t ? `${t.ok ? 'ok' : 'failed'}${t.status ? ` (HTTP ${t.status})` : ''} ${utc(t.tested_at)}` : 'never');

// tests holds the answers of the tests run on this page, by connection
// id: a list read before a test ended shows the test's answer, not the
// one before it.
const tests = new Map();

const newer = (a, b) => (!a || (b && Date.parse(b.tested_at) > Date.parse(a.tested_at)) ? b : a);

// showPins shows connection c's pinned tools under its tools, with the
// changes waiting for review and Accept and Reject for each.
async function showPins(c, name) {
  const host = document.getElementById('tool-pins');
  const decide = (verb, tool, sha256, b) => run(b, async () => {
    const method = verb === 'Accept' ? 'connections.accept_tools' : 'connections.reject_tools';
    const pins = await rpc(gateway, method, { id: c.id, tools: [{ name: tool, sha256 }] });
    renderPins(host, name, pins, decide);
    announce(verb === 'Accept' ? `Accepted the new definition of ${shown(tool)}; agents see it now.`
      : `Rejected the new definition of ${shown(tool)}; agents do not see it, and it is not offered again.`);
    document.getElementById('pins-h').focus();
  });
  renderPins(host, name, await rpc(gateway, 'connections.tool_pins', { id: c.id }), decide);
}

// renderConnections shows list, read from time asked on.
function renderConnections(list, asked) {
  connections = list;
  const tools = document.getElementById('tools');
  if (!list.some((c) => c.id === tools.dataset.connection)) tools.hidden = true;
  const host = document.getElementById('connections');
  if (!list.length) {
    host.replaceChildren(el('p', { className: 'summary' }, 'No connections yet.'));
    return;
  }
  const rows = list.map((c) => {
    const name = shown(c.name || c.id);
    const last = lastTest(newer(c.last_test, tests.get(c.id)));
    const act = el('td', { className: 'act' },
      actionButton('Test', 'Test', name, (b) => run(b, async () => {
        const r = await rpc(gateway, 'connections.test', { id: c.id });
        tests.set(c.id, r);
        successor(b).closest('tr')?.querySelector('[data-label="Last test"]').replaceChildren(lastTest(r));
        feedback(b, testSaid(r), r.ok ? 'done' : 'err');
      })), ' ',
      // Discovery lists an MCP server's tools; an HTTP connection has none.
      ...(c.protocol !== 'mcp' ? [] : [actionButton('Discover', 'Discover', name, (b) => run(b, async () => {
        const r = await rpc(gateway, 'connections.discover', { id: c.id, refresh: 'force' });
        const n = r?.tools?.length ?? 0;
        const section = document.getElementById('tools');
        section.dataset.connection = c.id;
        renderTools(section, name, r);
        await showPins(c, name);
        const waiting = section.querySelectorAll('[data-pending]').length;
        feedback(b, `Discovered ${n} tool${n === 1 ? '' : 's'}; they are listed under Tools of ${name}.` +
          (waiting ? ` ${waiting} changed since approved and wait${waiting === 1 ? 's' : ''} for your review.` : ''), 'done');
      })), ' ']),
      actionButton('Rotate', 'Rotate', name, () => openRotate(c)), ' ',
      actionButton('Edit', 'Edit', name, () => openEdit(c)), ' ',
      actionButton('Delete connection', 'Delete connection', name, async (b) => {
        if (!(await confirmAction(`Delete the connection ${name}? Agents can no longer call it through this gateway.`, 'Delete connection'))) return;
        await run(b, async () => {
          await rpc(gateway, 'connections.delete', { id: c.id });
          await loadGateway();
          announce(`Connection ${name} deleted.`);
        });
      }, true));
    return el('tr', { dataset: { connection: c.id } },
      cell('Connection', el('strong', {}, name), el('span', { className: 'muted' }, `${shown(c.id)}${c.protocol === 'mcp' ? ' · MCP' : ''} · `,
        // Its calls over time: the Activity page filtered to it.
        el('a', { href: `${base}/activity?connection=${encodeURIComponent(c.id)}`, 'aria-label': `Activity of ${name}` }, 'activity'))),
      cell('Base URL', el('span', { className: 'url' }, ...urlPieces(c.base_url).flatMap((p) => [el('span', {}, shown(p)), el('wbr')]))),
      cell('Authentication', el('div', {}, `${c.auth_mode ?? ''}${c.credential_keys?.length ? ` · ${c.credential_keys.join(', ')}` : ''}`,
        ...(c.auth_mode === 'oauth2_authorization_code' ? [renderAccounts(c,
          (a) => [reconnectButton(c, name, a), ' ', disconnectButton(c, name, a)],
          () => connectForm(c, name))] : []))),
      cell('Status', el('span', { className: c.status === 'active' ? 'badge approved' : 'badge' }, c.status)),
      cell('Last test', last),
      act);
  });
  const t = table(['Connection', 'Base URL', 'Authentication', 'Status', 'Last test', ''], rows);
  replaceKeeping(host, asked, el('div', {}, ...banners(list), t));
}

// banners tells of each connection whose accounts the provider refused:
// its agents are answered UPSTREAM_AUTH_REQUIRED until one reconnects.
function banners(list) {
  return list.flatMap((c) => {
    const refused = needsReconnecting(c);
    if (!refused.length) return [];
    const name = shown(c.name || c.id);
    const who = refused.map(accountName).join(', ');
    const commands = refused.map((a) => el('code', {}, shown(`gateway connect ${c.id}${a.subject ? ` --subject ${a.subject}` : ''}`)));
    return [el('p', { className: 'note', role: 'note', dataset: { reconnect: c.id } },
      el('strong', {}, `${name} needs reconnecting. `),
      `The provider refused the refresh token of ${who}; agents using it are refused until it is connected again: Reconnect it below, or on the gateway's host run `,
      ...commands.flatMap((code, i) => (i ? [' and ', code] : [code])), '.')];
  });
}

// reconnectButton connects account a of connection c again: the browser
// signs in at the provider.
function reconnectButton(c, name, a) {
  const who = accountName(a);
  return actionButton(`${who} of ${name}`, 'Reconnect', `${who} of ${name}`, (b) => run(b, () => connectAccount(gateway, c.id, a.subject ?? '')));
}

// disconnectButton disconnects account a of connection c: the gateway
// forgets its refresh token and revokes it at the provider.
function disconnectButton(c, name, a) {
  const who = accountName(a);
  return actionButton(`${who} of ${name}`, 'Disconnect', `${who} of ${name}`, async (b) => {
    if (!(await confirmAction(`Disconnect ${who} from ${name}? The gateway forgets its refresh token and revokes it at the provider; agents using it are refused until it is connected again.`, 'Disconnect'))) return;
    await run(b, async () => {
      const r = await rpc(gateway, 'connections.disconnect_account', { id: c.id, subject: a.subject ?? '' });
      await loadGateway();
      announce(`Disconnected ${who} from ${name}${r?.revoked_at_provider ? '; the provider revoked its token' : ''}.`);
    });
  }, true);
}

function renderVariables(list, asked) {
  const host = document.getElementById('variables');
  if (!list.length) {
    host.replaceChildren(el('p', { className: 'summary' }, 'No credential variables yet.'));
    return;
  }
  const rows = list.map((v) => el('tr', { dataset: { variable: v.key } },
    cell('Key', el('code', {}, v.key)),
    cell('Version', `${v.version ?? ''}`),
    cell('Updated', utc(v.updated_at ?? v.created_at)),
    el('td', { className: 'act' }, actionButton('Delete variable', 'Delete variable', v.key, async (b) => {
      if (!(await confirmAction(`Delete the variable ${v.key}?`, 'Delete variable'))) return;
      await run(b, async () => {
        await rpc(gateway, 'variables.delete', { key: v.key });
        await loadGateway();
        announce(`Variable ${v.key} deleted.`);
      });
    }, true))));
  replaceKeeping(host, asked, table(['Key', 'Version', 'Updated', ''], rows));
}

async function loadGateway() {
  const conns = document.getElementById('connections');
  const vars = document.getElementById('variables');
  const active = document.activeElement;
  const place = conns.contains(active) || vars.contains(active) ? placeOf(active) : null;
  const asked = performance.now();
  try {
    const [c, v] = await Promise.all([rpc(gateway, 'connections.list'), rpc(gateway, 'variables.list')]);
    renderConnections(c ?? [], asked);
    renderVariables(v ?? [], asked);
    if (place && !active.isConnected) land(place);
  } catch (err) {
    const text = err instanceof ApiError && err.code === errcode.GATEWAY_OFFLINE
      ? 'The gateway is offline: its connections and variables show once it reconnects.'
      : `The gateway could not be read: ${explain(err)}`;
    for (const host of [conns, vars]) host.replaceChildren(el('p', { className: 'note', role: 'note' }, text));
  }
}

function openEdit(c) {
  const d = document.getElementById('edit-connection');
  const f = d.querySelector('form');
  f.elements.id.value = c.id;
  f.elements.name.value = c.name ?? '';
  f.elements.base_url.value = c.base_url ?? '';
  f.elements.status.value = c.status ?? 'active';
  f.dataset.wasMcp = String(c.protocol === 'mcp');
  fillMCP(f, c);
  fillApprovals(f, c);
  d.showModal();
}

function openRotate(c) {
  const d = document.getElementById('rotate-connection');
  const f = d.querySelector('form');
  f.reset();
  f.elements.id.value = c.id;
  f.elements.key.value = c.auth_secret_key || c.credential_keys?.[0] || 'token';
  d.querySelector('h2').textContent = `Rotate the secret of ${shown(c.name || c.id)}`;
  d.showModal();
}

const value = (f, name) => f.elements[name]?.value.trim() ?? '';

const forms = {
  async 'add-connection'(f, button) {
    const id = value(f, 'id');
    const mode = value(f, 'auth_mode');
    const protocol = value(f, 'protocol');
    const params = { id, protocol, base_url: value(f, 'base_url'), ...(protocol === 'mcp' ? readMCP(f, false) : {}), ...readApprovals(f, false) };
    if (value(f, 'name')) params.name = value(f, 'name');
    if (value(f, 'service')) params.service = value(f, 'service');
    const secret = f.elements.secret.value;
    if (isOAuth(mode)) {
      // A public client has no secret: PKCE protects its code.
      Object.assign(params, { auth_mode: mode, ...readOAuth(f) });
      if (secret !== '') {
        params.auth_secret_key = 'client_secret';
        params.sealed_secrets = await sealSecrets(gateway, gatewayKey, { client_secret: secret });
      }
    } else if (protocol === 'http' || secret !== '') {
      // An MCP server may need no credential: then no secret, and no mode.
      Object.assign(params, { auth_mode: mode, auth_secret_key: 'token' });
      if (value(f, 'auth_name')) params[mode === 'query_param' ? 'auth_query_param' : 'auth_header_name'] = value(f, 'auth_name');
      params.sealed_secrets = await sealSecrets(gateway, gatewayKey, { token: secret });
    }
    await rpc(gateway, 'connections.create', params);
    f.reset();
    clearMCP(f);
    clearApprovals(f);
    showAuth(f);
    await loadGateway();
    feedback(button, `Connection ${id} added.`, 'done');
  },
  async 'connect-account'(f) {
    await connectAccount(gateway, f.dataset.connection, value(f, 'subject'));
  },
  async 'set-variable'(f, button) {
    const key = value(f, 'key');
    const sealed = await sealSecrets(gateway, gatewayKey, { [key]: f.elements.value.value });
    await rpc(gateway, 'variables.set', { key, sealed_secrets: sealed });
    f.reset();
    await loadGateway();
    feedback(button, `Variable ${key} set.`, 'done');
  },
  async 'edit-connection'(f) {
    const protocol = value(f, 'protocol');
    const params = { id: f.elements.id.value, name: value(f, 'name'), protocol, base_url: value(f, 'base_url'), status: value(f, 'status') };
    // Leaving MCP clears its settings, which an http connection refuses.
    if (protocol === 'mcp') Object.assign(params, readMCP(f, true));
    else if (f.dataset.wasMcp === 'true') Object.assign(params, cleared());
    Object.assign(params, readApprovals(f, true));
    await rpc(gateway, 'connections.update', params);
    // The list is read again before the dialog closes: an Edit pressed
    // next must fill the form from the rules just saved, or saving it
    // would remove them.
    await loadGateway();
    f.closest('dialog').close();
  },
  async 'rotate-connection'(f) {
    const params = { id: f.elements.id.value, sealed_secrets: await sealSecrets(gateway, gatewayKey, { [f.elements.key.value]: f.elements.secret.value }) };
    if (value(f, 'reason')) params.reason = value(f, 'reason');
    await rpc(gateway, 'connections.rotate', params);
    f.closest('dialog').close();
    await loadGateway();
  },
};

document.addEventListener('submit', (ev) => {
  const f = ev.target;
  const handler = forms[f.dataset.gwForm];
  if (!handler) return;
  ev.preventDefault();
  const button = ev.submitter ?? f.querySelector('[type=submit]');
  run(button, async () => {
    try {
      await handler(f, button);
    } catch (err) {
      throw err instanceof RPCError ? new Error(explain(err)) : err;
    }
  });
});

document.addEventListener('change', (ev) => {
  if ('protocol' in ev.target.dataset) {
    showProtocol(ev.target.form);
    showApprovals(ev.target.form);
  }
  if (('protocol' in ev.target.dataset || 'authMode' in ev.target.dataset) && ev.target.form.elements.auth_mode) showAuth(ev.target.form);
});

document.addEventListener('click', (ev) => {
  const b = ev.target.closest('button');
  if (!b) return;
  if ('close' in b.dataset) b.closest('dialog').close();
  else if ('addSubject' in b.dataset) addSubject(b.form).focus();
  else if ('addApprovalSubject' in b.dataset) addApprovalSubject(b.form).focus();
  else if ('pair' in b.dataset) run(b, startPairing);
});

// The list page: pairing, then the new gateway appears by itself.
async function startPairing() {
  const p = await call('POST', '/v1/gateways/pairings');
  const panel = document.getElementById('pairing');
  panel.querySelector('#pairing-session').textContent = p.session_id;
  panel.querySelector('#pairing-code').textContent = p.pair_code;
  panel.querySelector('#pairing-expires').textContent = utc(p.expires_at);
  const command = panel.querySelector('#pairing-command');
  command.value = `IDN_REGISTRY_URL=${location.origin} gateway pair --session-id ${p.session_id} --pair-code ${p.pair_code} --namespace ${ns}`;
  panel.hidden = false;
  command.focus();
  command.select();
  watchList(Date.parse(p.expires_at));
}

let watching = 0;

// watchList refreshes the gateway list while a pairing may complete.
function watchList(until) {
  clearInterval(watching);
  const known = () => [...document.querySelectorAll('tr[data-gateway]')].map((r) => r.dataset.gateway).join();
  let shown = known();
  watching = setInterval(async () => {
    if (Date.now() > until) {
      clearInterval(watching);
      return;
    }
    try {
      const { gateways } = await call('GET', '/v1/gateways');
      const now = gateways.map((g) => `${g.id}`).join();
      if (now !== shown) {
        await refreshList();
        shown = known();
      }
    } catch {
      // the next tick tries again
    }
  }, 1500);
}

async function refreshList() {
  const res = await fetch(location.href, { headers: { Accept: 'text/html' }, credentials: 'same-origin', cache: 'no-store' });
  if (!res.ok) return;
  const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
  const fresh = doc.getElementById('gateways-region');
  const old = document.getElementById('gateways-region');
  if (!fresh || !old) return;
  const active = old.contains(document.activeElement) ? document.activeElement : null;
  const place = placeOf(active);
  const more = fresh.querySelectorAll('tr[data-gateway]').length > old.querySelectorAll('tr[data-gateway]').length;
  old.replaceWith(document.adoptNode(fresh));
  const again = active?.dataset.call && document.querySelector(`[data-call="${CSS.escape(active.dataset.call)}"]`);
  if (again) again.focus();
  else if (place) land(place);
  if (more) announce('A gateway has connected: it is listed under Your gateways.');
}

if (page === 'gateway' && gateway) {
  const add = document.querySelector('[data-gw-form="add-connection"]');
  if (add) showAuth(add);
  loadGateway();
}
