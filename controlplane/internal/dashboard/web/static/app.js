// The dashboard's behaviour. Pages are rendered by the control plane; this
// module runs their actions through the JSON API, shows every error next to
// the control that caused it, and refreshes the changed parts of the page
// from a fresh render.
import { ApiError, base, call, describe, reference } from './api.js';
import * as errcode from './errcode.js';
import { shown } from './display.js';
import { announce, feedback } from './feedback.js';
import { busy as working, isBusy, land, placeOf, toHeading } from './focus.js';
import * as passkey from './webauthn.js';

const ns = document.body.dataset.namespace ?? '';
const page = document.body.dataset.page;
let busy = 0;
let lastRefresh = Date.now();

// run marks control busy while fn runs and shows fn's error beside it.
async function run(control, fn) {
  if (isBusy(control)) return;
  feedback(control, '');
  working(control, true);
  control.setAttribute('aria-busy', 'true');
  busy++;
  try {
    await fn();
  } catch (err) {
    feedback(control.isConnected ? control : findAgain(control) ?? control, describe(err), 'err', reference(err));
  } finally {
    working(control, false);
    control.removeAttribute('aria-busy');
    busy--;
  }
}

// selectorOf names an element so it can be found again after a refresh.
function selectorOf(el) {
  if (el.dataset?.call) return `[data-call="${CSS.escape(el.dataset.call)}"]`;
  if (el.id) return `#${CSS.escape(el.id)}`;
  if (el.getAttribute?.('href')) return `a[href="${CSS.escape(el.getAttribute('href'))}"]`;
  return null;
}

function findAgain(el) {
  const sel = selectorOf(el);
  return sel ? document.querySelector(sel) : null;
}

// refresh replaces each data-region of the page with its fresh render (of
// url, the page's own by default), keeping the keyboard focus where it was
// when that control still exists, else moving it to what took its place
// (focus.js).
export async function refresh(url = location.href) {
  lastRefresh = Date.now();
  const res = await fetch(url, { headers: { Accept: 'text/html' }, credentials: 'same-origin', cache: 'no-store' });
  if (res.redirected && new URL(res.url).pathname === `${base}/login`) {
    location.assign(res.url);
    return;
  }
  if (!res.ok) throw new Error(`The page could not be refreshed (HTTP ${res.status}). Reload it.`);
  const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
  const active = document.activeElement;
  const sel = active && active !== document.body ? selectorOf(active) : null;
  const place = placeOf(active);
  let focusHome = null;
  for (const region of document.querySelectorAll('[data-region]')) {
    const fresh = doc.getElementById(region.id);
    if (!fresh) continue;
    if (region.contains(active)) focusHome = fresh;
    region.replaceWith(document.adoptNode(fresh));
  }
  if (focusHome && !active.isConnected) {
    const again = sel && document.querySelector(sel);
    if (again) again.focus();
    else if (place) land(place);
    else toHeading(focusHome);
  }
}

// confirmAction asks in the page's dialog; verb names the confirming button.
function confirmAction(text, verb) {
  const d = document.getElementById('confirm');
  d.querySelector('#confirm-title').textContent = `${verb}?`;
  d.querySelector('#confirm-text').textContent = text;
  d.querySelector('#confirm-ok').textContent = verb;
  d.returnValue = '';
  d.showModal();
  return new Promise((resolve) => d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true }));
}

// stepUp runs fn; when the API wants a fresh passkey check first
// (REAUTH_REQUIRED), it runs the verify ceremony and fn once more.
async function stepUp(fn) {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof ApiError) || err.code !== errcode.REAUTH_REQUIRED) throw err;
    const options = await call('GET', '/v1/auth/verify/options');
    const credential = await passkey.get(options);
    await call('POST', '/v1/auth/verify', { credential });
    return fn();
  }
}

// showSecret reveals a value the API shows only once.
function showSecret(id, title, value, copyLabel) {
  const panel = document.getElementById(`${id}-secret`);
  panel.querySelector(`#${id}-secret-title`).textContent = title;
  panel.querySelector(`#${id}-secret-label`).textContent = title;
  panel.querySelector(`#${id}-secret-value`).value = value;
  panel.querySelector(`#${id}-secret-copy`).textContent = copyLabel;
  panel.hidden = false;
  panel.querySelector(`#${id}-secret-value`).focus();
  panel.querySelector(`#${id}-secret-value`).select();
  announce(`${title} shown once, below. Copy it now.`);
}

// nextPath is where to go after signing in: the page's data-next, which the
// server wrote after checking the page's ?next= (the one check there is).
function nextPath() {
  return document.querySelector('[data-next]')?.dataset.next || `${base}/claims`;
}

const value = (form, name) => form.elements[name]?.value.trim() ?? '';

// The forms, by their data-form name. Each gets the form and its button;
// a page's own module adds its forms here (actions.js).
export const forms = {
  async login(f) {
    const namespace = value(f, 'namespace');
    if (!namespace) throw new Error('Enter your namespace.');
    const options = await call('GET', `/v1/auth/login/options?namespace=${encodeURIComponent(namespace)}`);
    const credential = await passkey.get(options);
    await call('POST', '/v1/auth/login', { namespace, credential });
    location.assign(nextPath());
  },
  async signup(f) {
    const namespace = value(f, 'namespace');
    if (!namespace) throw new Error('Choose a namespace.');
    const options = await call('GET', `/v1/auth/signup/options?namespace=${encodeURIComponent(namespace)}`);
    const credential = await passkey.create(options);
    await call('POST', '/v1/auth/signup', { namespace, passkey_name: value(f, 'passkey_name'), credential });
    location.assign(`${base}/claims`);
  },
  // filter applies a filter form in place: the regions show the filtered
  // view, the address follows, and the keyboard stays on the form.
  async filter(f) {
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(f)) if (v !== '') q.set(k, v);
    const url = `${new URL(f.action).pathname}${q.size ? `?${q}` : ''}`;
    await refresh(url);
    history.pushState(null, '', url);
    const rows = document.querySelectorAll('[data-region] tr[data-activity]').length;
    announce(document.querySelector('#activity-region > .summary')?.textContent ?? `${rows} decisions shown.`);
  },
  async 'create-service'(f) {
    const body = { name: value(f, 'name'), service_endpoint: value(f, 'service_endpoint') };
    if (value(f, 'slug')) body.slug = value(f, 'slug');
    const r = await call('POST', '/v1/services', body);
    f.reset();
    await refresh();
    showSecret(f.dataset.secret, `API key of ${r.service.name}`, r.api_key.key, 'Copy API key');
  },
  async 'edit-service'(f, button) {
    const r = await call('PATCH', f.dataset.path, { name: value(f, 'name'), service_endpoint: value(f, 'service_endpoint') });
    document.title = `${r.name} · idn`;
    document.querySelector('h1').textContent = r.name;
    feedback(button, 'Saved.', 'done');
  },
  async 'add-webhook'(f) {
    const events = [...f.querySelectorAll('input[name=events]:checked')].map((i) => i.value);
    const r = await call('POST', f.dataset.path, { url: value(f, 'url'), events });
    f.reset();
    await refresh();
    showSecret(f.dataset.secret, `Signing secret of the webhook to ${r.url}`, r.secret, 'Copy webhook secret');
  },
  async 'add-passkey'(f, button) {
    const name = value(f, 'passkey_name');
    await stepUp(async () => {
      const options = await call('GET', '/v1/auth/passkeys/options');
      const credential = await passkey.create(options);
      await call('POST', '/v1/auth/passkeys', { passkey_name: name, credential });
    });
    const said = await (await import('./ownerkeys.js')).pinGateways('Passkey added.');
    f.reset();
    await refresh();
    feedback(button, said, 'done');
  },
  async settings(f, button) {
    await call('PATCH', '/v1/auth/settings', {
      email: value(f, 'email'),
      email_notifications: f.elements.email_notifications.checked,
      webhook_failures_notify: f.elements.webhook_failures_notify.checked,
    });
    feedback(button, 'Saved.', 'done');
  },
  async 'delete-account'(f) {
    if (value(f, 'confirm') !== ns) throw new Error(`Type ${ns} exactly to confirm the deletion.`);
    await stepUp(() => call('DELETE', '/v1/auth/account'));
    location.assign(`${base}/login?deleted=${encodeURIComponent(ns)}`);
  },
};

document.addEventListener('submit', (ev) => {
  const f = ev.target;
  const handler = forms[f.dataset.form];
  if (!handler) return;
  ev.preventDefault();
  const button = ev.submitter ?? f.querySelector('[type=submit]');
  run(button, () => handler(f, button));
});

// act runs a button's data-call ("METHOD /path"), after its confirmation.
async function act(b) {
  if (b.dataset.confirm && !(await confirmAction(b.dataset.confirm, b.dataset.verb))) return;
  const [method, path] = b.dataset.call.split(' ');
  await run(b, async () => {
    const send = () => call(method, path);
    await ('stepup' in b.dataset ? stepUp(send) : send());
    const said = 'pinkeys' in b.dataset ? await (await import('./ownerkeys.js')).pinGateways(b.dataset.announce) : b.dataset.announce;
    if (b.dataset.then) {
      location.assign(b.dataset.then);
      return;
    }
    if ('sessions' in b.dataset) await loadSessions();
    else await refresh();
    if (b.dataset.done) feedback(b.isConnected ? b : findAgain(b) ?? b, b.dataset.done, 'done');
    else announce(said);
  });
}

async function copy(b) {
  const input = document.getElementById(b.dataset.copy);
  try {
    await navigator.clipboard.writeText(input.value);
    feedback(b, 'Copied to the clipboard.', 'done');
  } catch {
    input.select();
    feedback(b, 'Selected: press Ctrl+C (⌘C on a Mac) to copy.', 'done');
  }
}

document.addEventListener('click', (ev) => {
  const b = ev.target.closest('button');
  if (!b) return;
  if (b.dataset.call) act(b);
  else if (b.dataset.copy) copy(b);
  else if (b.dataset.createKey) {
    run(b, async () => {
      const r = await call('POST', b.dataset.createKey);
      await refresh();
      showSecret(b.dataset.secret, `New API key of ${b.dataset.service}`, r.api_key.key, 'Copy API key');
    });
  } else if ('logout' in b.dataset) {
    run(b, async () => {
      await call('POST', '/v1/auth/logout');
      location.assign(`${base}/login?signedout=1`);
    });
  }
});

// Sessions are listed from the API; a control plane without the route
// leaves the section hidden.
async function loadSessions() {
  let data;
  try {
    data = await call('GET', '/v1/auth/sessions');
  } catch {
    return;
  }
  const list = document.getElementById('sessions-list');
  const place = list.contains(document.activeElement) ? placeOf(document.activeElement) : null;
  const table = document.createElement('table');
  table.className = 'cards';
  const head = table.createTHead().insertRow();
  for (const h of ['Started', 'Expires', 'Browser', 'Address', 'Actions']) {
    const th = document.createElement('th');
    th.scope = 'col';
    if (h === 'Actions') {
      const hidden = document.createElement('span');
      hidden.className = 'vh';
      hidden.textContent = h;
      th.append(hidden);
    } else th.textContent = h;
    head.append(th);
  }
  const body = table.createTBody();
  for (const s of data.sessions ?? []) {
    const tr = body.insertRow();
    const cell = (label, text) => {
      const td = tr.insertCell();
      td.dataset.label = label;
      td.textContent = text || '—';
      return td;
    };
    const utc = (t) => (t ? `${t.replace('T', ' ').slice(0, 16)} UTC` : '');
    cell('Started', utc(s.created_at));
    cell('Expires', utc(s.expires_at));
    cell('Browser', shown(s.user_agent));
    cell('Address', s.client_address);
    const td = tr.insertCell();
    td.className = 'act';
    if (s.current) {
      td.textContent = 'This session';
    } else {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'danger small';
      b.textContent = 'End session';
      b.dataset.call = `DELETE /v1/auth/sessions/${encodeURIComponent(s.id)}`;
      b.dataset.sessions = '';
      b.dataset.announce = `The session started ${td.parentElement.cells[0].textContent} has ended.`;
      b.setAttribute('aria-label', `End session started ${td.parentElement.cells[0].textContent}`);
      td.append(b);
    }
  }
  list.replaceChildren(table);
  document.getElementById('sessions').hidden = false;
  if (place) land(place);
}

// pollClaims keeps the claims view current: it asks the API for the same
// view (and the pending count) and re-renders when anything differs, so
// new requests appear without a reload, and says when new ones wait.
async function pollClaims() {
  const region = document.getElementById('claims-region');
  if (!region || document.hidden || busy > 0 || document.querySelector('dialog[open]')) return;
  const q = new URLSearchParams(region.dataset.query);
  const base = `/v1/namespaces/${encodeURIComponent(ns)}/claims?`;
  try {
    const view = await call('GET', base + q);
    let pending = view.pagination.total;
    if (q.get('status') !== 'pending') {
      const p = new URLSearchParams({ status: 'pending', limit: '1' });
      if (q.get('service')) p.set('service', q.get('service'));
      pending = (await call('GET', base + p)).pagination.total;
    }
    const shown = [...region.querySelectorAll('tr[data-id]')].map((r) => `${r.dataset.id}:${r.dataset.status}`).join();
    const fresh = view.claims.map((c) => `${c.claim_id}:${c.status}`).join();
    const waiting = pending - Number(region.dataset.pending);
    if (shown !== fresh || `${view.pagination.total}` !== region.dataset.total || `${pending}` !== region.dataset.pending ||
        Date.now() - lastRefresh > 60000) {
      await refresh();
    }
    if (waiting > 0) announce(waiting === 1 ? 'A new claim is waiting for approval.' : `${waiting} new claims are waiting for approval.`);
  } catch (err) {
    if (err.status === 401) location.assign(`${base}/login?next=${encodeURIComponent(location.pathname + location.search)}`);
  }
}

function signIn() {
  const status = document.getElementById('signin-status');
  const token = location.hash.slice(1);
  history.replaceState(null, '', location.pathname + location.search);
  const fail = (text) => {
    status.textContent = text;
    status.className = 'note err-note';
    announce(text, 'err');
  };
  if (!token) {
    fail('This sign-in link is incomplete: open the whole link you were given.');
    return;
  }
  call('POST', '/v1/auth/signin-link', { token }).then(() => location.replace(nextPath()), (err) => fail(`${describe(err)} (${reference(err)})`));
}

function flash() {
  const q = new URLSearchParams(location.search);
  const el = document.getElementById('flash');
  if (!el) return;
  if (q.has('deleted')) el.textContent = `The account ${q.get('deleted')} has been deleted.`;
  else if (q.has('signedout')) el.textContent = 'You are logged out.';
  else return;
  el.hidden = false;
  announce(el.textContent);
}

// Back and forward through filtered views show them again.
window.addEventListener('popstate', () => {
  if (document.querySelector('form[data-form=filter]')) refresh().catch(() => location.reload());
});

if (page === 'claims') setInterval(pollClaims, 2000);
if (page === 'account') loadSessions();
if (page === 'signin') signIn();
if (page === 'login') flash();
