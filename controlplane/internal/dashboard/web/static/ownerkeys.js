// Paired gateways pin the owner's passkeys. After a passkey is added or
// removed, the owner signs the new set with a passkey the gateways pinned;
// each gateway checks the signature itself before it trusts the new set.
// Loaded only when a passkey changes.
import { ApiError, call } from './api.js';
import * as errcode from './errcode.js';
import * as passkey from './webauthn.js';

// pinGateways signs the change and returns what to tell the owner after
// what: whether every gateway took it. With no gateway paired there is
// nothing to sign.
export async function pinGateways(what) {
  let o;
  try {
    o = await call('GET', '/v1/auth/passkeys/gateways');
  } catch (err) {
    if (err instanceof ApiError && err.code === errcode.VALIDATION_ERROR) return what;
    throw err;
  }
  const credential = await passkey.get({ challenge: o.challenge, rpId: o.rp_id, userVerification: o.user_verification,
    allowCredentials: o.credential_ids.map((id) => ({ type: 'public-key', id })) });
  const r = credential.response;
  const done = await call('POST', '/v1/auth/passkeys/gateways', { update: { ...o.update, assertion: {
    credential_id: credential.rawId, authenticator_data: r.authenticatorData, client_data_json: r.clientDataJSON, signature: r.signature } } });
  const n = done.gateways.filter((g) => g.status === 'refused').length;
  if (n === 0) return `${what} Your gateways trust the change.`;
  return `${what} ${n} gateway${n === 1 ? '' : 's'} refused the change and keep${n === 1 ? 's' : ''} the old passkeys: pair ${n === 1 ? 'it' : 'them'} again.`;
}
