// verifyRequest accepts what the gateway accepts and refuses what it
// refuses, with the gateway's codes: the shared vectors and their negative
// cases, then attack rows as the Go verifier's tests name them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Identity, verifyRequest, withIdnAgent, MemoryNonceStore, VerifyError, idnFetch } from "../dist/index.js";

const V = JSON.parse(readFileSync(new URL("../../../identity/testdata/idn-profile-v1.json", import.meta.url), "utf8"));
const at = (unix) => () => unix * 1000;

function received(vec, change = {}) {
  const headers = { ...vec.request_headers, ...vec.headers };
  if (change.header) headers[change.header[0]] = change.header[1];
  return { method: change.method ?? vec.method, url: change.url ?? vec.url, headers, body: change.body ?? vec.body };
}

test("the shared vectors verify, with the subject decoded", async () => {
  for (const vec of V.vectors) {
    const agent = await verifyRequest(received(vec), { nonces: new MemoryNonceStore(), now: at(vec.created) });
    assert.equal(agent.namespace, "vector-alice", vec.name);
    assert.equal(agent.subject, vec.subject, vec.name);
    assert.equal(agent.nonce, vec.nonce);
    assert.equal(agent.name, vec.agent_name, vec.name);
    assert.equal(agent.keyId, V.identity_record.keyId);
  }
});

test("the shared negative cases are refused with the gateway's code", async () => {
  for (const neg of V.negative) {
    const src = V.vectors.find((v) => v.name === neg.source);
    await assert.rejects(
      verifyRequest(received(src, neg.change), { nonces: new MemoryNonceStore(), now: at(neg.change.now ?? src.created) }),
      (e) => e instanceof VerifyError && neg.expect.includes(e.code),
      `${neg.name}: want ${neg.expect}`,
    );
  }
});

test("attacks are refused", async () => {
  const base = V.vectors.find((v) => v.name === "get-no-body");
  const post = V.vectors.find((v) => v.name === "post-with-body");
  const nonces = new MemoryNonceStore(undefined, at(base.created)); // the verifier's clock
  const ok = (r, n = nonces) => verifyRequest(r, { nonces: n, now: at(base.created) });
  const rows = [
    ["replayed nonce", async () => { await ok(received(base)); return ok(received(base)); }, "AUTH_REPLAY_DETECTED"],
    ["no nonce store", () => verifyRequest(received(base), { now: at(base.created) }), "AUTH_NONCE_INVALID"],
    ["second signature", () => ok(received(base, { header: ["signature-input", base.headers["signature-input"] + ", sig2=(\"@method\");created=1700000000"] })), "AUTH_HEADERS_INVALID"],
    ["signature without its input", () => ok({ ...received(base), headers: { ...base.headers, "signature-input": undefined } }), "AUTH_HEADERS_INVALID"],
    ["missing identity header", () => ok({ ...received(base), headers: { ...base.headers, "idn-agent-key": undefined } }), "AUTH_IDENTITY_INVALID"],
    ["duplicate namespace header", () => ok({ ...received(base), headers: { ...base.headers, "idn-namespace": ["vector-alice", "vector-alice"] } }), "AUTH_HEADERS_INVALID"],
    ["body under a no-body signature", () => ok(received(base, { body: "smuggled" })), "AUTH_SIGNED_COMPONENTS_INVALID"],
    ["body-less request under a body signature", () => ok(received(post, { body: "" })), "AUTH_SIGNED_COMPONENTS_INVALID"],
    ["uncovered identity header", () => ok(received(base, { header: ["signature-input", base.headers["signature-input"].replace(' "idn-agent-cert"', "")] })), "AUTH_SIGNED_COMPONENTS_INVALID"],
    ["other algorithm", () => ok(received(base, { header: ["signature-input", base.headers["signature-input"].replace('alg="ed25519"', 'alg="hmac-sha256"')] })), "AUTH_SIGNATURE_INVALID"],
    ["key of another agent", () => ok(received(base, { header: ["idn-agent-key", "ed25519:" + Buffer.alloc(32, 7).toString("base64")] })), "AUTH_IDENTITY_INVALID"],
    ["nonce with a quote", () => ok(received(base, { header: ["signature-input", base.headers["signature-input"].replace(/nonce="[^"]*"/, 'nonce="short"')] })), "AUTH_NONCE_INVALID"],
    ["expired by its own expires", () => ok(received(base, { header: ["signature-input", base.headers["signature-input"] + ";expires=1699999999"] })), "AUTH_SIGNATURE_INVALID"],
    ["garbage signature-input", () => ok(received(base, { header: ["signature-input", "sig1=(\"@method\""] })), "AUTH_HEADERS_INVALID"],
  ];
  for (const [name, run, code] of rows) {
    await assert.rejects(run(), (e) => e instanceof VerifyError && e.code === code, name);
  }
});

test("withIdnAgent serves verified agents and answers others as the gateway does", async () => {
  const agent = await Identity.create("service-caller", { name: "Caller" });
  const handler = withIdnAgent((req, who) => Response.json({ namespace: who.namespace, subject: who.subject, fingerprint: who.fingerprint }), { nonces: new MemoryNonceStore() });
  // idnFetch's own fetch option hands the signed request to the handler.
  const f = idnFetch(agent, { subject: "Zoë", fetch: (input, init) => handler(new Request(input, init)) });
  const res = await f("https://svc.example/items?", { method: "POST", body: "{}" });
  assert.deepEqual(await res.json(), { namespace: "service-caller", subject: "Zoë", fingerprint: agent.fingerprint });
  const refused = await handler(new Request("https://svc.example/items"));
  assert.equal(refused.status, 403);
  assert.equal(refused.headers.get("idn-error"), "AUTH_IDENTITY_INVALID");
  assert.equal((await refused.json()).code, "AUTH_IDENTITY_INVALID");
});

test("the memory nonce store forgets a nonce only after its time, and refuses when full", () => {
  let t = 1000;
  const s = new MemoryNonceStore(2, () => t);
  assert.equal(s.check("ns", "n1", new Date(2000)), true);
  assert.equal(s.check("ns", "n1", new Date(2000)), false);
  assert.equal(s.check("other", "n1", new Date(2000)), true, "keyed by namespace and nonce");
  assert.throws(() => s.check("ns", "n2", new Date(2000)), /full/);
  t = 2001;
  assert.equal(s.check("ns", "n1", new Date(3000)), true);
});

test("idnAgentMiddleware in a real Express app", async () => {
  const { default: express } = await import("express");
  const { idnAgentMiddleware } = await import("../dist/index.js");
  const app = express();
  app.use(idnAgentMiddleware({ nonces: new MemoryNonceStore() }));
  app.use((req, res) => res.json({ subject: req.idnAgent.subject, fingerprint: req.idnAgent.fingerprint, body: Buffer.from(req.body).toString() }));
  const server = app.listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  const origin = `http://127.0.0.1:${server.address().port}`;
  try {
    const agent = await Identity.create("express-caller");
    const r = await idnFetch(agent, { subject: "山田" })(`${origin}/items?q=1`, { method: "POST", body: '{"a":1}' });
    assert.deepEqual(await r.json(), { subject: "山田", fingerprint: agent.fingerprint, body: '{"a":1}' });
    const refused = await fetch(`${origin}/items`);
    assert.equal(refused.status, 403);
    assert.equal(refused.headers.get("idn-error"), "AUTH_IDENTITY_INVALID");
    // Any client that signs under the profile; the same headers twice are a replay.
    const headers = await agent.sign({ method: "POST", url: `${origin}/items?q=1`, body: '{"a":1}' });
    assert.equal((await fetch(`${origin}/items?q=1`, { method: "POST", body: '{"a":1}', headers })).status, 200);
    const replay = await fetch(`${origin}/items?q=1`, { method: "POST", body: '{"a":1}', headers });
    assert.equal(replay.headers.get("idn-error"), "AUTH_REPLAY_DETECTED");
  } finally {
    server.close();
  }
});

test("controlPlaneClaims decides as the gateway, signed as the service", async () => {
  const { createServer } = await import("node:http");
  const { controlPlaneClaims } = await import("../dist/index.js");
  const { verifyReceived } = await import("../test-support/verify.mjs");
  for (const [status, code] of [["pending", "AUTH_CLAIM_REQUIRED"], ["rejected", "AUTH_CLAIM_REJECTED"], ["revoked", "AUTH_CLAIM_REVOKED"], ["approved", undefined]]) {
    const seen = [];
    // Answers as the control plane's /v1/verify and POST /v1/claims do.
    const cp = createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        seen.push({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks) });
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify(req.method === "GET" ? { authorized: false, claim_id: "clm_1", status } : { claim_id: "clm_1", status }));
      });
    });
    cp.listen(0, "127.0.0.1");
    await new Promise((r) => cp.once("listening", r));
    const origin = `http://127.0.0.1:${cp.address().port}`;
    try {
      const claims = controlPlaneClaims({ controlPlane: origin, apiKey: "idn_sk_test", service: "weather", identity: await Identity.create("weather-service") });
      const caller = await Identity.create("caller-ns");
      const url = "https://svc.example/x";
      const agent = await verifyRequest({ method: "GET", url, headers: await caller.sign({ method: "GET", url }, { subject: "Zoë" }) }, { nonces: new MemoryNonceStore() });
      const d = await claims(agent);
      assert.equal(d.authorized, code === undefined, status);
      if (code) assert.deepEqual(d, { authorized: false, code, claimId: "clm_1", claimStatus: status });
      const [verify, filed] = seen;
      assert.match(verify.url, /^\/v1\/verify\?namespace=caller-ns&/);
      assert.equal(JSON.parse(filed.body).subject, "Zoë");
      for (const s of seen) {
        assert.equal(verifyReceived(s, s.body, origin), "ok", "signed as the service");
        assert.equal(s.headers.authorization, "Bearer idn_sk_test");
      }
    } finally {
      cp.close();
    }
  }
});
