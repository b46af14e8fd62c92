// Passkey ceremonies: the server's options JSON (base64url binary fields,
// bare or under "publicKey") in, the standard PublicKeyCredential JSON out.

const decode = (s) => {
  const b64 = s.replace(/-/g, '+').replace(/_/g, '/');
  const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0)).buffer;
};

const encode = (buf) => {
  let s = '';
  for (const b of new Uint8Array(buf)) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
};

const descriptors = (list) => (list ?? []).map((c) => ({ ...c, id: decode(c.id) }));

export const supported = () => typeof window.PublicKeyCredential === 'function';

function need() {
  if (!supported()) throw new Error('This browser does not support passkeys.');
}

// create runs a registration ceremony.
export async function create(options) {
  need();
  const o = options.publicKey ?? options;
  const publicKey = { ...o, challenge: decode(o.challenge), user: { ...o.user, id: decode(o.user.id) },
    excludeCredentials: descriptors(o.excludeCredentials) };
  const cred = await navigator.credentials.create({ publicKey });
  const r = cred.response;
  return {
    id: cred.id, rawId: encode(cred.rawId), type: cred.type,
    authenticatorAttachment: cred.authenticatorAttachment ?? undefined,
    clientExtensionResults: cred.getClientExtensionResults(),
    response: { clientDataJSON: encode(r.clientDataJSON), attestationObject: encode(r.attestationObject),
      transports: r.getTransports ? r.getTransports() : [] },
  };
}

// get runs an assertion ceremony.
export async function get(options) {
  need();
  const o = options.publicKey ?? options;
  const publicKey = { ...o, challenge: decode(o.challenge), allowCredentials: descriptors(o.allowCredentials) };
  const cred = await navigator.credentials.get({ publicKey });
  const r = cred.response;
  return {
    id: cred.id, rawId: encode(cred.rawId), type: cred.type,
    authenticatorAttachment: cred.authenticatorAttachment ?? undefined,
    clientExtensionResults: cred.getClientExtensionResults(),
    response: { clientDataJSON: encode(r.clientDataJSON), authenticatorData: encode(r.authenticatorData),
      signature: encode(r.signature), userHandle: r.userHandle ? encode(r.userHandle) : undefined },
  };
}
