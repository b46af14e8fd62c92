import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, statSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Identity } from "../dist/index.js";

const V = JSON.parse(readFileSync(new URL("../../../identity/testdata/idn-profile-v1.json", import.meta.url), "utf8"));

test("a record in the CLI's format loads, keeps unknown fields and saves 0700/0600", async () => {
  const home = mkdtempSync(join(tmpdir(), "idn-ts-"));
  const dir = join(home, "identities", "vector-alice");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "identity.json"), JSON.stringify(V.identity_record, null, 2));
  const id = await Identity.load(undefined, { home });
  assert.equal(id.namespace, "vector-alice");
  assert.equal(id.keyId, V.identity_record.keyId);
  assert.equal(id.publicKey, V.identity_record.publicKey);
  assert.equal(id.name, undefined);

  await id.rename("Invoice bot", new Date("2024-01-01T00:00:00Z"));
  const path = await id.save({ home });
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.equal(statSync(dir).mode & 0o777, 0o700);
  const saved = JSON.parse(readFileSync(path, "utf8"));
  assert.deepEqual(saved.someFutureField, { kept: true });
  assert.equal(saved.privateKey, V.identity_record.privateKey);
  assert.equal(saved.certificate.name, "Invoice bot");
  assert.equal(saved.updatedAt, "2024-01-01T00:00:00Z");

  const back = await Identity.load("vector-alice", { home });
  assert.equal(back.name, "Invoice bot");
  assert.equal(back.publicKey, id.publicKey);
  assert.deepEqual(await Identity.list({ home }), ["vector-alice"]);
});

test("create, save and load through IDN_HOME", async () => {
  const home = mkdtempSync(join(tmpdir(), "idn-ts-"));
  process.env.IDN_HOME = home;
  try {
    const id = await Identity.create("ts-agent", { name: "TS agent" });
    await id.save();
    const back = await Identity.load("ts-agent");
    assert.equal(back.certificateHeader, id.certificateHeader);
    assert.equal(back.name, "TS agent");
  } finally {
    delete process.env.IDN_HOME;
  }
});

test("refusals", async () => {
  const home = mkdtempSync(join(tmpdir(), "idn-ts-"));
  await assert.rejects(Identity.load("nobody-here", { home }), /no identity "nobody-here"/);
  await assert.rejects(Identity.load(undefined, { home }), /no identity in/);
  await assert.rejects(Identity.create("-bad-"), /invalid namespace/);
  const tampered = { ...V.identity_record, publicKey: V.named_identity.certificate.publicKey.replace("U", "V") };
  await assert.rejects(Identity.fromRecord(JSON.stringify(tampered)), /does not match/);
  const otherCert = { ...V.identity_record, certificate: { ...V.identity_record.certificate, issuedAt: "2020-01-01T00:00:00Z" } };
  await assert.rejects(Identity.fromRecord(JSON.stringify(otherCert)), /proof does not verify/);
  const id = await Identity.create("ts-agent");
  await assert.rejects(id.sign({ method: "GET", url: "http://x/" }, { nonce: "short" }), /nonce/);
  await assert.rejects(id.sign({ method: "GET", url: "http://x/" }, { subject: "a\nb" }), /subject/);
  await assert.rejects(id.sign({ method: "GET", url: "ftp://x/" }), /http/);
});

test("an identity whose key stays behind an external signer", async () => {
  const { verifyRequest, MemoryNonceStore } = await import("../dist/index.js");
  // A non-extractable WebCrypto key stands for a keychain, token or KMS.
  const kp = await crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"]);
  const pub = new Uint8Array(await crypto.subtle.exportKey("raw", kp.publicKey));
  let calls = 0;
  const sign = async (data) => (calls++, new Uint8Array(await crypto.subtle.sign("Ed25519", kp.privateKey, data)));
  const id = await Identity.withSigner("kms-agent", pub, sign, { name: "KMS bot" });
  assert.equal(id.name, "KMS bot");
  assert.equal(calls, 1, "the certificate's proof");
  const url = "https://gw.example/proxy/x";
  const headers = await id.sign({ method: "POST", url, body: "{}" });
  const agent = await verifyRequest({ method: "POST", url, headers, body: "{}" }, { nonces: new MemoryNonceStore() });
  assert.equal(agent.fingerprint, id.fingerprint);
  assert.throws(() => id.toRecord(), /external signer/);

  const again = await Identity.withSigner("kms-agent", pub, sign, { certificate: id.certificate });
  assert.equal(again.certificateHeader, id.certificateHeader, "a kept certificate is reused");
  const other = await crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"]);
  const wrong = async (data) => new Uint8Array(await crypto.subtle.sign("Ed25519", other.privateKey, data));
  await assert.rejects(Identity.withSigner("kms-agent", pub, wrong), /proof does not verify/);
  await assert.rejects(Identity.withSigner("other-agent", pub, sign, { certificate: id.certificate }), /not for this namespace/);
});
