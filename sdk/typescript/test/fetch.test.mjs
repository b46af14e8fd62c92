import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { once } from "node:events";
import { createHash } from "node:crypto";
import { Identity, idnFetch, IdnError, readError, throwIfError, waitForApproval, encodeSubject, decodeSubject, validateSubject } from "../dist/index.js";
import { verifyReceived } from "../test-support/verify.mjs";

// A server that records what it received.
async function recorder(answer) {
  const seen = [];
  const srv = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks) });
      answer(req, res, seen.length);
    });
  });
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  return { url: `http://127.0.0.1:${srv.address().port}`, seen, close: () => srv.close() };
}

test("idnFetch signs each request freshly, with content-digest for a body", async () => {
  const s = await recorder((req, res) => res.end("ok"));
  try {
    const id = await Identity.create("fetch-agent", { name: "Fetch agent" });
    const f = idnFetch(id, { subject: "user-7" });
    const r1 = await f(`${s.url}/proxy/c/items?q=a%2Fb`, { method: "POST", body: JSON.stringify({ a: 1 }), headers: { "content-type": "application/json", signature: "stale" } });
    assert.equal(await r1.text(), "ok");
    await f(new URL(`${s.url}/proxy/c/items`));
    const [post, get] = s.seen;
    assert.equal(verifyReceived(post, post.body, s.url), "ok");
    assert.equal(verifyReceived(get, get.body, s.url), "ok");
    assert.equal(post.headers["idn-subject"], "user-7");
    assert.equal(post.headers["content-digest"], `sha-256=:${createHash("sha256").update('{"a":1}').digest("base64")}:`);
    assert.equal(post.body.toString(), '{"a":1}');
    assert.equal(post.url, "/proxy/c/items?q=a%2Fb");
    assert.match(post.headers["signature-input"], /^sig1=\("@method" "@target-uri" "content-digest" /);
    assert.match(post.headers.signature, /^sig1=:[A-Za-z0-9+/]{86}==:$/);
    assert.equal(get.headers["content-digest"], undefined);
    assert.notEqual(/nonce="([^"]+)"/.exec(post.headers["signature-input"])[1], /nonce="([^"]+)"/.exec(get.headers["signature-input"])[1]);
    // The base the server would rebuild matches what the SDK signed.
    const base = await id.signatureBase(
      { method: "GET", url: `${s.url}/proxy/c/items` },
      { nonce: /nonce="([^"]+)"/.exec(get.headers["signature-input"])[1], created: Number(/created=(\d+)/.exec(get.headers["signature-input"])[1]) },
    );
    assert.ok(base.endsWith(get.headers["signature-input"].slice(5)));
  } finally {
    s.close();
  }
});

test("a subject beyond Latin-1 and a bare '?' are sent as signed", async () => {
  const s = await recorder((req, res) => res.end("ok"));
  try {
    const id = await Identity.create("fetch-agent");
    // Before: fetch threw on 山 and sent ë as Latin-1; the bare '?' was
    // signed but dropped on the wire.
    await idnFetch(id, { subject: " Zoë Müller · 山田 🤖 " })(`${s.url}/proxy/c/items?`);
    const [got] = s.seen;
    assert.equal(got.url, "/proxy/c/items");
    assert.equal(got.headers["idn-subject"], '%"Zo%c3%ab M%c3%bcller %c2%b7 %e5%b1%b1%e7%94%b0 %f0%9f%a4%96"');
    assert.equal(decodeSubject(got.headers["idn-subject"]), "Zoë Müller · 山田 🤖");
    assert.equal(verifyReceived(got, got.body, s.url), "ok");
  } finally {
    s.close();
  }
});

test("subjects: printable ASCII as itself, the rest as a display string, strictly decoded", () => {
  assert.equal(encodeSubject("user-42"), "user-42");
  assert.equal(encodeSubject('%"x"'), '%"%25%22x%22"');
  assert.equal(decodeSubject('%"%25%22x%22"'), '%"x"');
  for (const bad of ['%"Zo%C3%AB"', '%"Zo%eb"', '%"Zo', '%"a"b"', '%"a%e"']) assert.throws(() => decodeSubject(bad), TypeError, bad);
  assert.throws(() => validateSubject("evil\u202Eexe"), TypeError);
});

test("redirects are not followed", async () => {
  const s = await recorder((req, res) => {
    res.writeHead(302, { location: "http://127.0.0.1:1/elsewhere" });
    res.end();
  });
  try {
    const id = await Identity.create("fetch-agent");
    const r = await idnFetch(id)(`${s.url}/x`);
    assert.equal(r.status, 302);
    assert.equal(s.seen.length, 1);
  } finally {
    s.close();
  }
});

const envelope = (code, extra = {}) => JSON.stringify({ error: "refused", code, request_id: "req_1", timestamp: "2026-01-01T00:00:00Z", ...extra });

test("readError reads the envelope into an IdnError", async () => {
  const r = new Response(envelope("AUTH_CLAIM_REQUIRED", { claim_id: "clm_1", claim_status: "pending" }), { status: 403, headers: { "retry-after": "3" } });
  const e = await readError(r);
  assert.ok(e instanceof IdnError);
  assert.equal(e.code, "AUTH_CLAIM_REQUIRED");
  assert.equal(e.status, 403);
  assert.equal(e.requestId, "req_1");
  assert.equal(e.claimId, "clm_1");
  assert.equal(e.claimStatus, "pending");
  assert.equal(e.retryAfter, 3);
  assert.ok(e.claimRequired);
  assert.equal(JSON.parse(await r.text()).code, "AUTH_CLAIM_REQUIRED", "the body stays readable");
  assert.equal(await readError(new Response("fine")), undefined);
  const plain = await readError(new Response("<html>", { status: 502, headers: { "x-request-id": "req_2" } }));
  assert.equal(plain.code, "HTTP_502");
  assert.equal(plain.requestId, "req_2");
  await assert.rejects(throwIfError(new Response(envelope("CONNECTION_NOT_FOUND"), { status: 404 })), (err) => err.code === "CONNECTION_NOT_FOUND");
});

test("waitForApproval retries with the same claim until approved, and gives up at the deadline", async () => {
  let n = 0;
  const claims = [];
  const answers = () => {
    n++;
    if (n <= 2) return new Response(envelope("AUTH_CLAIM_REQUIRED", { claim_id: "clm_9", claim_status: "pending" }), { status: 403 });
    if (n === 3) return new Response(envelope("AUTH_CLAIMS_UNAVAILABLE"), { status: 503, headers: { "retry-after": "0" } });
    return new Response("done");
  };
  const r = await waitForApproval(async () => answers(), { initialDelayMs: 1, onClaim: (id) => claims.push(id) });
  assert.equal(await r.text(), "done");
  assert.equal(n, 4);
  assert.deepEqual(claims, ["clm_9"]);

  const started = Date.now();
  await assert.rejects(
    waitForApproval(async () => new Response(envelope("AUTH_CLAIM_REQUIRED", { claim_id: "clm_8" }), { status: 403 }), { timeoutMs: 50, initialDelayMs: 10 }),
    (err) => err instanceof IdnError && err.claimId === "clm_8",
  );
  assert.ok(Date.now() - started < 1000);
  // Other errors are returned, not retried.
  const other = await waitForApproval(async () => new Response(envelope("CONNECTION_DISABLED"), { status: 403 }));
  assert.equal((await readError(other)).code, "CONNECTION_DISABLED");
});
