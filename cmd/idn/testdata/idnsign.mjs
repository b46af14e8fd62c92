// A signer of the idn-rfc9421-v1 profile (docs/profile.md) written from the
// profile alone with node's crypto, to check that the gateway accepts a
// signer other than its own. signingFetch wraps fetch so that every request
// is signed with the identity record at path, as idn's Go Transport does.
import { createHash, createPrivateKey, randomBytes, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';

const pkcs8Ed25519Prefix = Buffer.from('302e020100300506032b657004220420', 'hex');

export function signingFetch(path, subject, next = fetch) {
  const record = JSON.parse(readFileSync(path, 'utf8'));
  const key = createPrivateKey({
    key: Buffer.concat([pkcs8Ed25519Prefix, Buffer.from(record.privateKey, 'base64')]),
    format: 'der',
    type: 'pkcs8',
  });
  const cert = Buffer.from(JSON.stringify(record.certificate)).toString('base64url');
  return async (input, init = {}) => {
    const url = new URL(input instanceof Request ? input.url : input);
    const method = init.method ?? 'GET';
    const headers = new Headers(init.headers);
    const body = init.body == null ? Buffer.alloc(0) : Buffer.from(await new Response(init.body).arrayBuffer());
    headers.set('idn-namespace', record.namespace);
    headers.set('idn-subject', subject || record.namespace);
    headers.set('idn-agent-key', record.publicKey);
    headers.set('idn-agent-cert', cert);
    const components = ['@method', '@target-uri'];
    if (body.length > 0) {
      headers.set('content-digest', `sha-256=:${createHash('sha256').update(body).digest('base64')}:`);
      components.push('content-digest');
    } else {
      headers.delete('content-digest');
    }
    components.push('idn-namespace', 'idn-subject', 'idn-agent-key', 'idn-agent-cert');
    const created = Math.floor(Date.now() / 1000);
    const nonce = randomBytes(16).toString('hex');
    const params = `(${components.map((c) => `"${c}"`).join(' ')});created=${created};keyid="${record.keyId}";alg="ed25519";nonce="${nonce}"`;
    const value = (c) => (c === '@method' ? method.toLowerCase() : c === '@target-uri' ? url.href : headers.get(c));
    const base = components.map((c) => `"${c}": ${value(c)}`).concat(`"@signature-params": ${params}`).join('\n');
    headers.set('signature-input', `sig1=${params}`);
    headers.set('signature', `sig1=:${sign(null, Buffer.from(base), key).toString('base64')}:`);
    return next(url, { ...init, method, headers, body: body.length > 0 ? body : undefined });
  };
}
