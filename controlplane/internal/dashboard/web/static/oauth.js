// OAuth connections on the gateway page: the form's OAuth fields, shown
// for the two OAuth modes, and a connection's connected accounts (status
// and times only: their tokens stay sealed on the gateway), with Connect.
import { call } from './api.js';
import { shown } from './display.js';
import { el } from './dom.js';
import { patterns } from './mcp.js';

const CLIENT = 'oauth2_client_credentials';
const CODE = 'oauth2_authorization_code';

export const isOAuth = (mode) => mode === CLIENT || mode === CODE;

// showAuth shows form's fields for its auth mode. The secret is the
// client secret in an OAuth mode, optional for a public client.
export function showAuth(form) {
  const mode = form.elements.auth_mode?.value;
  const oauth = isOAuth(mode);
  const mcp = form.elements.protocol?.value === 'mcp';
  for (const part of form.querySelectorAll('[data-oauth]')) part.hidden = !oauth;
  for (const part of form.querySelectorAll('[data-oauth-code]')) part.hidden = mode !== CODE;
  for (const part of form.querySelectorAll('[data-static-auth]')) part.hidden = oauth;
  for (const part of form.querySelectorAll('[data-oauth-hint]')) part.hidden = !oauth;
  const label = form.querySelector('[data-secret-label]');
  if (label) label.textContent = oauth ? 'Client secret' : 'Secret';
  const optional = mcp || mode === CODE;
  for (const part of form.querySelectorAll('[data-secret-optional]')) part.hidden = !optional;
  if (form.elements.secret) form.elements.secret.required = !optional;
  form.elements.oauth_client_id.required = oauth;
}

// readOAuth returns form's OAuth fields as the admin API takes them.
export function readOAuth(form) {
  const mode = form.elements.auth_mode.value;
  const v = (name) => form.elements[name].value.trim();
  const p = { oauth_client_id: v('oauth_client_id') };
  const names = ['oauth_token_url', 'oauth_audience', 'oauth_resource'];
  if (mode === CODE) names.push('oauth_issuer', 'oauth_authorization_url', 'oauth_revocation_url');
  for (const name of names) if (v(name)) p[name] = v(name);
  const scopes = patterns(form.elements.oauth_scopes.value);
  if (scopes.length) p.oauth_scopes = scopes;
  if (mode === CODE && form.elements.oauth_per_subject.checked) p.oauth_per_subject = true;
  return p;
}

const utc = (t) => (t ? `${t.replace('T', ' ').slice(0, 16)} UTC` : '');

// accountName is how an account is named: its subject, or the
// connection's one account.
export const accountName = (a) => (a.subject ? shown(a.subject) : 'the account');

// needsReconnecting lists the accounts of c the provider refused.
export const needsReconnecting = (c) => (c.oauth_accounts ?? []).filter((a) => a.status === 'needs_reconnecting');

// renderAccounts lists connection c's accounts, each with the buttons
// actions(account) makes, then connect(), the control that connects one.
export function renderAccounts(c, actions, connect) {
  const list = c.oauth_accounts ?? [];
  if (!list.length) return el('div', {}, el('p', { className: 'muted' }, 'No account connected.'), connect());
  return el('div', {}, el('ul', { className: 'accounts', 'aria-label': `Accounts of ${shown(c.name || c.id)}` }, ...list.map((a) => {
    const ok = a.status === 'connected';
    return el('li', { dataset: { account: a.subject ?? '' } },
      el('span', {}, a.subject ? el('code', {}, shown(a.subject)) : 'one account'),
      el('span', { className: ok ? 'badge approved' : 'badge rejected' }, ok ? 'connected' : 'needs reconnecting'),
      el('span', { className: 'muted' }, `connected ${utc(a.connected_at)}${a.refreshed_at ? `, refreshed ${utc(a.refreshed_at)}` : ''}${a.expires_at ? `, serves until ${utc(a.expires_at)}` : ''}`),
      ...actions(a));
  })), connect());
}

// connectForm is the control that connects an account to connection c
// (a subject's, with one account per subject) through the form handler
// 'connect-account'.
export function connectForm(c, name) {
  const button = el('button', { type: 'submit', className: 'secondary small', 'aria-label': `Connect an account to ${name}` }, 'Connect');
  const form = el('form', { className: 'row connect', dataset: { gwForm: 'connect-account', connection: c.id } });
  if (c.oauth_per_subject) {
    const id = `connect-${c.id}`;
    form.append(el('label', { htmlFor: id }, 'Subject'),
      el('input', { id, name: 'subject', required: true, autocapitalize: 'none', spellcheck: false, maxLength: 256, 'aria-label': `Subject whose account to connect to ${name}` }));
  } else if (c.oauth_accounts?.length) {
    return el('span');
  }
  form.append(button);
  return form;
}

// connectAccount connects subject's account ('' for the one account) to
// connection id of gateway: the gateway answers the provider's
// authorization URL, where the browser goes to sign in. The provider
// sends it back to the control plane, whose page says how it ended.
export async function connectAccount(gateway, id, subject) {
  const r = await call('POST', `/v1/gateways/${encodeURIComponent(gateway)}/connect`, { connection_id: id, ...(subject ? { subject } : {}) });
  const u = new URL(r.authorization_url);
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error('The gateway answered no web address to sign in at.');
  location.assign(u.href);
}
