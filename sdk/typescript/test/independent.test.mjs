// An independent RFC 9421 implementation (the npm package
// http-message-signatures) verifies what this SDK signs, in profile mode:
// "@method" lower-cased (the profile's one departure), the profile's
// components and parameters required, created within 300 s. The varied
// set covers the defects of round one: subjects beyond Latin-1 and a bare '?'.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { once } from "node:events";
import { createPublicKey, verify as edVerify } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { spawn, spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { httpbis } from "http-message-signatures";
import { Identity, idnFetch } from "../dist/index.js";

const V = JSON.parse(readFileSync(new URL("../../../identity/testdata/idn-profile-v1.json", import.meta.url), "utf8"));
const PROFILE = ["@method", "@target-uri", "idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert"];

// verifyIndependently checks a received request with http-message-signatures.
// The package reads the clock itself, so the vectors (created in 2023) go
// without the age check; the SDK's own verifiers hold them to the window.
async function verifyIndependently(req, now, maxAge = 300) {
  const key = Buffer.from(String(req.headers["idn-agent-key"]).slice("ed25519:".length), "base64");
  const pub = createPublicKey({ key: Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), key]), format: "der", type: "spki" });
  return httpbis.verifyMessage(
    {
      keyLookup: async () => ({ id: "agent", algs: ["ed25519"], verify: async (data, sig) => edVerify(null, data, pub, sig) }),
      requiredFields: req.headers["content-digest"] ? [...PROFILE, "content-digest"] : PROFILE,
      requiredParams: ["created", "keyid", "alg", "nonce"],
      maxAge,
      notAfter: now,
      componentParser: (name, _params, message) => (name === "@method" ? [message.method.toLowerCase()] : null),
    },
    req,
  );
}

test("the shared vectors verify independently", async () => {
  for (const vec of V.vectors) {
    // A vector's request_headers are the request's own (MCP's routing
    // headers); its headers are what signing added.
    const headers = { ...vec.request_headers, ...vec.headers };
    const ok = await verifyIndependently({ method: vec.method, url: vec.url, headers }, vec.created, null);
    assert.equal(ok, true, vec.name);
  }
});

test("a varied set of requests this SDK signs verifies independently", async () => {
  const seen = [];
  const srv = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      seen.push({ method: req.method, url: `http://127.0.0.1:${srv.address().port}${req.url}`, headers: req.headers });
      res.end("ok");
    });
  });
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const origin = `http://127.0.0.1:${srv.address().port}`;
  try {
    const cases = [];
    for (const name of [undefined, "Invoice bot · CI & <deploy>", "Ünïcödé агент 機械 🤖"]) {
      const id = await Identity.create("independent-agent", name ? { name } : {});
      for (const subject of [undefined, "user-42", "Zoë Müller", "山田 太郎", "🤖 agent #7", '%"quoted" 100%']) {
        const f = idnFetch(id, subject ? { subject } : {});
        for (const [method, path, body] of [
          ["GET", "/proxy/c/items?", undefined],
          ["GET", "/proxy/c/a%2Fb?q=x%20y&r=%E2%9C%93", undefined],
          ["POST", "/proxy/c/notes", '{"text":"héllo"}'],
          ["PUT", "/proxy/c/items/1?view=full", "x".repeat(3000)],
          ["DELETE", "/proxy/c/items/1", undefined],
          ["PATCH", "/mcp/tools", '{"jsonrpc":"2.0"}'],
        ]) {
          cases.push(`${name} ${subject} ${method} ${path}`);
          await f(`${origin}${path}`, { method, body });
        }
      }
    }
    assert.equal(seen.length, cases.length);
    const now = Math.floor(Date.now() / 1000);
    for (let i = 0; i < seen.length; i++) assert.equal(await verifyIndependently(seen[i], now), true, cases[i]);
    // The same verifier refuses a changed subject: it is no rubber stamp.
    const changed = { ...seen[0], headers: { ...seen[0].headers, "idn-subject": "someone-else" } };
    assert.equal(await verifyIndependently(changed, now), false);
  } finally {
    srv.close();
  }
});

// The Python SDK's signatures, made through httpx and requests against the
// same kind of local server, verify independently too.
test("a varied set of requests the Python SDK signs verifies independently", async (t) => {
  const python = process.env.IDN_PYTHON || "/usr/bin/python3";
  const probe = spawnSync(python, ["-c", "import cryptography, httpx, requests"]);
  if (probe.status !== 0) {
    if (process.env.CI === "true") assert.fail(`${python} lacks cryptography, httpx or requests`);
    t.skip(`${python} lacks cryptography, httpx or requests`);
    return;
  }
  const seen = [];
  const srv = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      seen.push({ method: req.method, url: `http://127.0.0.1:${srv.address().port}${req.url}`, headers: req.headers });
      res.end("ok");
    });
  });
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const home = mkdtempSync(join(tmpdir(), "idn-py-"));
  try {
    const script = `
import sys, httpx, requests, idn
from idn.httpx_auth import IdnAuth as HX
from idn.requests_auth import IdnAuth as RQ
origin = sys.argv[1]
n = 0
for name in (None, "Ünïcödé агент 機械 🤖"):
    agent = idn.Identity.create("py-independent", name=name)
    for subject in (None, "user-42", "Zoë Müller", "山田 太郎"):
        for method, path, body in (("GET", "/proxy/c/a%2Fb?q=x%20y", None), ("POST", "/proxy/c/notes", b'{"text":"h\\xc3\\xa9llo"}'), ("DELETE", "/proxy/c/items/1", None)):
            httpx.request(method, origin + path, content=body, auth=HX(agent, subject=subject))
            requests.request(method, origin + path, data=body, auth=RQ(agent, subject=subject))
            n += 2
print(n)
`;
    // Asynchronously: the server answering it runs on this event loop.
    const child = spawn(python, ["-c", script, `http://127.0.0.1:${srv.address().port}`], {
      env: { ...process.env, IDN_HOME: home, PYTHONPATH: fileURLToPath(new URL("../../python/src", import.meta.url)) },
    });
    let out = "";
    let errs = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (errs += d));
    const [code] = await once(child, "exit");
    assert.equal(code, 0, errs);
    const sent = Number(out.trim());
    assert.equal(seen.length, sent);
    assert.ok(sent >= 48);
    const now = Math.floor(Date.now() / 1000);
    for (const r of seen) assert.equal(await verifyIndependently(r, now), true, `${r.method} ${r.url} ${r.headers["idn-subject"]}`);
  } finally {
    srv.close();
    rmSync(home, { recursive: true, force: true });
  }
});
