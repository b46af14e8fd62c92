// The Actions page: approving a held call signs the action's challenge for
// the chosen terms with a passkey; the control plane and the gateway each
// check the assertion. New actions appear and are announced on their own.
import { base, call } from './api.js';
import { forms, refresh } from './app.js';
import { announce } from './feedback.js';
import * as passkey from './webauthn.js';

const value = (form, name) => form.elements[name]?.value.trim() ?? '';

forms['approve-action'] = async (f) => {
  const id = encodeURIComponent(f.dataset.id);
  const terms = { uses: Number(value(f, 'uses')), until_minutes: Number(value(f, 'until_minutes')) };
  const o = await call('GET', `/v1/actions/${id}/challenge?${new URLSearchParams(terms)}`);
  const credential = await passkey.get({ challenge: o.challenge, rpId: o.rp_id, userVerification: o.user_verification,
    allowCredentials: o.credential_ids.map((cid) => ({ type: 'public-key', id: cid })) });
  const r = credential.response;
  await call('POST', `/v1/actions/${id}/approve`, { ...terms, assertion: {
    credential_id: credential.rawId, authenticator_data: r.authenticatorData, client_data_json: r.clientDataJSON, signature: r.signature } });
  const label = f.querySelector('[type=submit]').getAttribute('aria-label').replace(/^Approve (.*) with a passkey$/, '$1');
  await refresh();
  announce(`${label} approved.`);
};

// poll keeps the view current, as the claims page does.
async function poll() {
  const region = document.getElementById('actions-region');
  if (!region || document.hidden || document.querySelector('[aria-busy="true"], dialog[open]')) return;
  try {
    const view = await call('GET', '/v1/actions');
    const shown = region.dataset.ids.trim().split(' ').filter(Boolean);
    const fresh = view.actions.map((a) => a.id);
    const added = fresh.filter((id) => !shown.includes(id)).length;
    if (fresh.join() !== shown.join()) await refresh();
    if (added > 0) announce(added === 1 ? 'A new action is waiting for your approval.' : `${added} new actions are waiting for your approval.`);
  } catch (err) {
    if (err.status === 401) location.assign(`${base}/login?next=${encodeURIComponent(location.pathname + location.search)}`);
  }
}

setInterval(poll, 2000);
