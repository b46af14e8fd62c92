// The shared vectors (identity/testdata/idn-profile-v1.json) drive this
// implementation as they drive the Go and Python ones, byte for byte, on
// both crypto backends: Node's crypto module and WebCrypto.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createPublicKey, verify } from "node:crypto";
import { Identity, useCryptoBackend, cryptoBackend, encodeCertificateHeader, certificateCanonicalText, verifyCertificate, validateName } from "../dist/index.js";

const V = JSON.parse(readFileSync(new URL("../../../identity/testdata/idn-profile-v1.json", import.meta.url), "utf8"));
const seed = Buffer.from(V.identity_record.privateKey, "base64");
const issuedAt = new Date(V.identity_record.createdAt);

function identityFor(name) {
  return Identity.fromSeed(V.identity_record.namespace, new Uint8Array(seed), { issuedAt, ...(name ? { name } : {}) });
}

// mcpOf is a vector's MCP routing headers, as identity.sign takes them.
const mcpOf = (vec) => ({ method: vec.request_headers?.["mcp-method"], name: vec.request_headers?.["mcp-name"] });

// verifies sig over base with the vector key, as a verifier would.
function verifies(base, signatureHeader) {
  const raw = Buffer.from(V.identity_record.publicKey.slice("ed25519:".length), "base64");
  const key = createPublicKey({ key: Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), raw]), format: "der", type: "spki" });
  return verify(null, Buffer.from(base), key, Buffer.from(signatureHeader.slice(6, -1), "base64"));
}

for (const backendName of ["node", "webcrypto"]) {
  test(`vectors on ${backendName}`, async (t) => {
    useCryptoBackend(backendName);
    assert.equal(await cryptoBackend(), backendName);

    await t.test("certificate proofs", async () => {
      const plain = await identityFor();
      assert.equal(certificateCanonicalText(plain.certificate), V.certificate_canonical_text);
      assert.deepEqual(plain.certificate, V.identity_record.certificate);
      assert.equal(plain.certificateHeader, V.vectors[0].headers["idn-agent-cert"]);
      const named = await identityFor(V.named_identity.name);
      assert.equal(certificateCanonicalText(named.certificate), V.named_identity.canonical_text);
      assert.deepEqual(named.certificate, V.named_identity.certificate);
      assert.equal(named.certificateHeader, V.named_identity.certificate_header);
      assert.equal(encodeCertificateHeader(V.named_identity.certificate), V.named_identity.certificate_header);
      assert.equal(named.name, V.named_identity.name);
      await verifyCertificate(V.named_identity.certificate);
    });

    for (const vec of V.vectors) {
      await t.test(vec.name, async () => {
        const id = await identityFor(vec.agent_name);
        const req = { method: vec.method, url: vec.url, body: vec.body, mcp: mcpOf(vec) };
        const opts = { subject: vec.subject, nonce: vec.nonce, created: vec.created };
        assert.equal(await id.signatureBase(req, opts), vec.signature_base);
        const headers = await id.sign(req, opts);
        for (const [name, want] of Object.entries(vec.headers)) assert.equal(headers[name], want, name);
        assert.deepEqual(Object.keys(headers).sort(), Object.keys(vec.headers).sort());
        assert.ok(verifies(vec.signature_base, headers.signature));
      });
    }

    // Each negative case changes what a verifier sees; the vector's
    // signature must not verify over the base of the changed request (or
    // the changed certificate must not verify, or the time is outside the
    // window).
    for (const neg of V.negative) {
      await t.test(`negative ${neg.name}`, async () => {
        const src = V.vectors.find((v) => v.name === neg.source);
        const id = await identityFor(src.agent_name);
        const c = neg.change;
        if (c.now !== undefined) {
          const age = c.now - src.created;
          assert.ok(age > 300 || age < -30, "outside [created-30 s, created+300 s]");
          return;
        }
        if (c.header?.[0] === "idn-agent-cert") {
          const cert = JSON.parse(Buffer.from(c.header[1], "base64url").toString("utf8"));
          await assert.rejects(verifyCertificate(cert), /proof does not verify/);
          return;
        }
        const req = { method: c.method ?? src.method, url: c.url ?? src.url, body: c.body ?? src.body, mcp: mcpOf(src) };
        let base = await id.signatureBase(req, { subject: src.subject, nonce: src.nonce, created: src.created });
        // A change to signature-input is not a line of the base: verify.test.mjs runs it through verifyRequest.
        if (c.header && !base.includes(`"${c.header[0]}": `)) return;
        const sent = { ...src.request_headers, ...src.headers };
        if (c.header) base = base.replace(`"${c.header[0]}": ${sent[c.header[0]]}`, `"${c.header[0]}": ${c.header[1]}`);
        assert.notEqual(base, src.signature_base);
        assert.equal(verifies(base, src.headers.signature), false);
      });
    }

    await t.test("names", async () => {
      for (const name of V.names.valid) {
        validateName(name);
        const id = await identityFor(name);
        await verifyCertificate(id.certificate);
      }
      for (const bad of V.names.invalid) {
        assert.throws(() => validateName(bad.name), TypeError, `${JSON.stringify(bad.name)} (${bad.why})`);
        if (bad.name !== "") await assert.rejects(identityFor(bad.name), TypeError);
      }
    });
  });
}
