import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { once } from "node:events";
import { createHash } from "node:crypto";
import { Identity, idnFetch, IdnError, readError, throwIfError, waitForApproval, parseRetryAfter, encodeSubject, decodeSubject, validateSubject } from "../dist/index.js";
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

test("redirects are not followed unless asked", async () => {
  const s = await recorder((req, res) => {
    res.writeHead(302, { location: "http://127.0.0.1:1/elsewhere" });
    res.end();
  });
  try {
    const id = await Identity.create("fetch-agent");
    const r = await idnFetch(id)(`${s.url}/x`);
    assert.equal(r.status, 302);
    assert.equal(s.seen.length, 1);
    await assert.rejects(idnFetch(id)(`${s.url}/x`, { redirect: "error" }), TypeError);
  } finally {
    s.close();
  }
});

const SIGNING = ["signature", "signature-input", "content-digest", "idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert"];

test("a followed redirect to another host goes without signature, body or credentials", async () => {
  // Before: redirect "follow" was handed to fetch, which re-sent every
  // signing header and the body to whatever host the 307 named.
  const elsewhere = await recorder((req, res) => res.end("elsewhere"));
  const gateway = await recorder((req, res) => {
    res.writeHead(req.url === "/see-other" ? 303 : 307, { location: `${elsewhere.url}/landing?x=1` });
    res.end();
  });
  try {
    const id = await Identity.create("fetch-agent");
    const f = idnFetch(id, { subject: "Zoë" });
    const r = await f(`${gateway.url}/proxy/c/upload`, { method: "POST", body: "secret body", redirect: "follow", headers: { authorization: "Bearer agent", "content-type": "text/plain", "x-kept": "1" } });
    assert.equal(await r.text(), "elsewhere");
    await f(`${gateway.url}/see-other`, { method: "PUT", body: "more", redirect: "follow" });
    const [signed] = gateway.seen;
    assert.equal(verifyReceived(signed, signed.body, gateway.url), "ok");
    const [moved, seeOther] = elsewhere.seen;
    assert.equal(moved.method, "POST");
    assert.equal(moved.url, "/landing?x=1");
    assert.equal(moved.body.length, 0);
    for (const name of [...SIGNING, "authorization", "content-type"]) assert.equal(moved.headers[name], undefined, name);
    assert.equal(moved.headers["x-kept"], "1");
    assert.equal(seeOther.method, "GET");
    for (const name of SIGNING) assert.equal(seeOther.headers[name], undefined, name);
  } finally {
    gateway.close();
    elsewhere.close();
  }
});

test("idempotent requests are retried on 429/502/503/504 and network errors, each signed afresh", async () => {
  const s = await recorder((req, res, n) => {
    if (req.url === "/drop" && n === 1) return req.socket.destroy(); // a network error
    if (req.url === "/long") {
      res.writeHead(503, { "retry-after": "3600" });
      return res.end();
    }
    const status = [503, 429, 200][(n - 1) % 3];
    res.writeHead(status, status === 200 ? {} : { "retry-after": "0" });
    res.end(String(status));
  });
  try {
    const id = await Identity.create("fetch-agent");
    const f = idnFetch(id, { retry: { initialDelayMs: 1 } });
    const r = await f(`${s.url}/flaky`);
    assert.equal(await r.text(), "200");
    assert.equal(s.seen.length, 3);
    for (const got of s.seen) assert.equal(verifyReceived(got, got.body, s.url), "ok");
    assert.equal(new Set(s.seen.map((x) => x.headers["signature-input"])).size, 3, "each try signed afresh");

    s.seen.length = 0;
    const post = await f(`${s.url}/flaky`, { method: "POST", body: "x" });
    assert.equal(post.status, 503, "POST is not retried unless asked");
    assert.equal(s.seen.length, 1);
    const asked = await idnFetch(id, { retry: { initialDelayMs: 1, nonIdempotent: true } })(`${s.url}/flaky`, { method: "POST", body: "x" });
    assert.equal(asked.status, 200);

    s.seen.length = 0;
    assert.equal((await f(`${s.url}/long`)).status, 503, "a Retry-After beyond maxDelayMs is the caller's");
    assert.equal(s.seen.length, 1);
    s.seen.length = 0;
    assert.equal((await idnFetch(id, { retry: { retries: 0 } })(`${s.url}/flaky`)).status, 503);
  } finally {
    s.close();
  }
  const dropper = await recorder((req, res, n) => (n === 1 ? req.socket.destroy() : res.end("after a network error")));
  try {
    const id = await Identity.create("fetch-agent");
    const r = await idnFetch(id, { retry: { initialDelayMs: 1 } })(`${dropper.url}/x`);
    assert.equal(await r.text(), "after a network error");
  } finally {
    dropper.close();
  }
});

const envelope = (code, extra = {}) => JSON.stringify({ error: "refused", code, request_id: "req_1", timestamp: "2026-01-01T00:00:00Z", ...extra });
// An answer an idn server wrote: the envelope, marked with Idn-Error.
const idnAnswer = (status, code, extra = {}, headers = {}) => new Response(envelope(code, extra), { status, headers: { "idn-error": code, ...headers } });

test("readError reads the envelope into an IdnError", async () => {
  const r = idnAnswer(403, "AUTH_CLAIM_REQUIRED", { claim_id: "clm_1", claim_status: "pending" }, { "retry-after": "3" });
  const e = await readError(r);
  assert.ok(e instanceof IdnError);
  assert.equal(e.code, "AUTH_CLAIM_REQUIRED");
  assert.ok(e.fromIdn);
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
  await assert.rejects(throwIfError(idnAnswer(404, "CONNECTION_NOT_FOUND")), (err) => err.code === "CONNECTION_NOT_FOUND");
});

test("an envelope the gateway did not mark is not acted on", async () => {
  // An upstream's 403 passed through the gateway: its body names a claim of
  // another key; without Idn-Error (the gateway strips an upstream's), or
  // with one naming another code, it is an ordinary HTTP error.
  const forged = { claim_id: "clm_stranger", claim_status: "pending" };
  for (const headers of [{}, { "idn-error": "UPSTREAM_ERROR" }]) {
    const e = await readError(new Response(envelope("AUTH_CLAIM_REQUIRED", forged), { status: 403, headers }));
    assert.equal(e.code, "HTTP_403");
    assert.equal(e.fromIdn, false);
    assert.equal(e.claimId, undefined);
    assert.equal(e.claimRequired, false);
    assert.equal(e.envelope.claim_id, "clm_stranger", "the body stays readable");
  }
  const seen = [];
  let n = 0;
  const r = await waitForApproval(async () => (n++, new Response(envelope("AUTH_CLAIM_REQUIRED", forged), { status: 403 })), { onClaim: (id) => seen.push(id) });
  assert.equal(r.status, 403);
  assert.equal(n, 1, "not retried");
  assert.deepEqual(seen, [], "the owner is not shown the stranger's claim");
});

test("Retry-After: delta-seconds in ASCII digits or an HTTP date, nothing else", async () => {
  const after = async (v) => (await readError(idnAnswer(503, "AUTH_CLAIMS_UNAVAILABLE", {}, { "retry-after": v }))).retryAfter;
  assert.equal(await after("7"), 7);
  assert.equal(await after("\u00b2"), undefined);
  assert.equal(await after("\u00c2\u00b2"), undefined); // "²" in UTF-8, as fetch reads header bytes
  assert.equal(await after("-1"), undefined);
  assert.equal(await after("1.5"), undefined);
  assert.equal(await after("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
  assert.equal(parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", Date.parse("Wed, 21 Oct 2015 07:27:00 GMT")), 60);
  assert.equal(parseRetryAfter("tomorrow", Date.now()), undefined);
});

test("waitForApproval retries with the same claim until approved, and gives up at the deadline", async () => {
  let n = 0;
  const claims = [];
  const answers = () => {
    n++;
    if (n <= 2) return idnAnswer(403, "AUTH_CLAIM_REQUIRED", { claim_id: "clm_9", claim_status: "pending" });
    if (n === 3) return idnAnswer(503, "AUTH_CLAIMS_UNAVAILABLE", {}, { "retry-after": "0" });
    return new Response("done");
  };
  const r = await waitForApproval(async () => answers(), { initialDelayMs: 1, onClaim: (id) => claims.push(id) });
  assert.equal(await r.text(), "done");
  assert.equal(n, 4);
  assert.deepEqual(claims, ["clm_9"]);

  const started = Date.now();
  await assert.rejects(
    waitForApproval(async () => idnAnswer(403, "AUTH_CLAIM_REQUIRED", { claim_id: "clm_8" }), { timeoutMs: 50, initialDelayMs: 10 }),
    (err) => err instanceof IdnError && err.claimId === "clm_8",
  );
  assert.ok(Date.now() - started < 1000);
  // Other errors are returned, not retried.
  const other = await waitForApproval(async () => idnAnswer(403, "CONNECTION_DISABLED"));
  assert.equal((await readError(other)).code, "CONNECTION_DISABLED");
});

test("a rejected or revoked claim ends the wait at once", async () => {
  for (const [code, extra] of [
    ["AUTH_CLAIM_REJECTED", { claim_id: "clm_7", claim_status: "rejected" }],
    ["AUTH_CLAIM_REVOKED", { claim_id: "clm_7", claim_status: "revoked" }],
    ["AUTH_CLAIM_REQUIRED", { claim_id: "clm_7", claim_status: "rejected" }],
  ]) {
    let n = 0;
    await assert.rejects(
      waitForApproval(async () => (n++, n === 1 ? idnAnswer(403, "AUTH_CLAIM_REQUIRED", { claim_id: "clm_7", claim_status: "pending" }) : idnAnswer(403, code, extra)), {
        initialDelayMs: 1,
        timeoutMs: 60_000,
      }),
      (err) => err instanceof IdnError && err.code === code && err.claimRefused,
      code,
    );
    assert.equal(n, 2, `${code}: no try after the refusal`);
  }
});

test("waitForApproval waits on a held action until approved, and a denial ends it", async () => {
  let n = 0;
  const actions = [];
  const held = { action_id: "act_5", expires_at: "2026-12-02T03:10:00Z" };
  const r = await waitForApproval(async () => (n++, n <= 2 ? idnAnswer(403, "AUTH_ACTION_APPROVAL_REQUIRED", held) : new Response("paid")), {
    initialDelayMs: 1,
    onAction: (id, err) => actions.push([id, err.expiresAt]),
  });
  assert.equal(await r.text(), "paid");
  assert.deepEqual(actions, [["act_5", "2026-12-02T03:10:00Z"]]);

  n = 0;
  await assert.rejects(
    waitForApproval(async () => (n++, n === 1 ? idnAnswer(403, "AUTH_ACTION_APPROVAL_REQUIRED", held) : idnAnswer(403, "AUTH_ACTION_DENIED", { action_id: "act_5" })), {
      initialDelayMs: 1,
      timeoutMs: 60_000,
    }),
    (err) => err instanceof IdnError && err.code === "AUTH_ACTION_DENIED" && err.claimRefused && err.actionId === "act_5",
  );
  assert.equal(n, 2, "no try after the denial");
});

test("onClaim names the key fingerprint the owner should see", async () => {
  const s = await recorder((req, res) => {
    res.writeHead(403, { "content-type": "application/json", "idn-error": "AUTH_CLAIM_REQUIRED" });
    res.end(envelope("AUTH_CLAIM_REQUIRED", { claim_id: "clm_5", claim_status: "pending" }));
  });
  try {
    const id = await Identity.create("fetch-agent");
    assert.match(id.fingerprint, /^ed25519-[0-9a-f]{16}$/);
    assert.ok(id.keyId.endsWith("#" + id.fingerprint));
    const seen = [];
    await assert.rejects(waitForApproval(() => idnFetch(id)(`${s.url}/x`), { timeoutMs: 1, onClaim: (claim, err) => seen.push([claim, err.keyFingerprint]) }));
    assert.deepEqual(seen, [["clm_5", id.fingerprint]]);
  } finally {
    s.close();
  }
});

test("idnFetch covers MCP's routing headers, and a swapped tool fails verification", async () => {
  const s = await recorder((req, res) => res.end("ok"));
  try {
    const id = await Identity.create("fetch-agent");
    const f = idnFetch(id);
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "search" } });
    await f(`${s.url}/mcp/github`, { method: "POST", body, headers: { "content-type": "application/json", "mcp-method": "tools/call", "mcp-name": "search" } });
    const [post] = s.seen;
    assert.match(post.headers["signature-input"], /"idn-agent-cert" "mcp-method" "mcp-name"\);/);
    assert.equal(verifyReceived(post, post.body, s.url), "ok");
    const swapped = { ...post, headers: { ...post.headers, "mcp-name": "delete_repo" } };
    assert.notEqual(verifyReceived(swapped, post.body, s.url), "ok");
  } finally {
    s.close();
  }
});
