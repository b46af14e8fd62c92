// Against the real control plane and gateway, which the Go test
// e2e/TestSDKsAgainstRealServers starts and describes in IDN_IT_*: the
// whole path of a new agent, from identity to an MCP tool call.
import { test } from "node:test";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Identity, idnFetch, readError, throwIfError, waitForApproval, withIdnAgent, controlPlaneClaims, MemoryNonceStore } from "../dist/index.js";

const env = process.env;
const skip = env.IDN_IT_GATEWAY ? false : "run by the Go test e2e/TestSDKsAgainstRealServers";

test("a new agent: refused, approved, REST, MCP and a signed control-plane route", { skip }, async () => {
  const ns = env.IDN_IT_NAMESPACE;
  // The package's init command writes the identity (IDN_HOME: the Go side
  // loads it afterwards).
  const init = spawnSync(process.execPath, [fileURLToPath(new URL("../dist/cli.js", import.meta.url)), "init", ns, "--name", env.IDN_IT_NAME], { encoding: "utf8" });
  assert.equal(init.status, 0, init.stderr);
  const agent = await Identity.load(ns);
  assert.ok(init.stdout.includes(agent.fingerprint));
  const f = idnFetch(agent);
  const url = `${env.IDN_IT_GATEWAY}/proxy/${env.IDN_IT_REST}/forecast?city=Paris`;

  const refusal = await readError(await f(url));
  assert.equal(refusal?.code, "AUTH_CLAIM_REQUIRED", String(refusal));
  assert.equal(refusal.status, 403);
  assert.match(refusal.claimId, /^clm_/);
  assert.equal(refusal.claimStatus, "pending");
  assert.ok(refusal.requestId);

  // The gateway remembers the claim: asking again names the same one.
  const again = await readError(await f(url));
  assert.equal(again?.claimId, refusal.claimId);

  const approved = await fetch(`${env.IDN_IT_APPROVE}?namespace=${ns}&claim=${refusal.claimId}`, { method: "POST" });
  assert.equal(approved.status, 200, await approved.text());

  const seen = [];
  const ok = await throwIfError(await waitForApproval(() => f(url), { initialDelayMs: 200, timeoutMs: 30_000, onClaim: (id, err) => seen.push([id, err.keyFingerprint]) }));
  assert.deepEqual(await ok.json(), { city: "Paris", forecast: "sunny", credential_injected: true });
  assert.ok(seen.every(([id, fp]) => id === refusal.claimId && fp === agent.fingerprint), `claims seen while waiting: ${seen}`);
  assert.equal(refusal.keyFingerprint, agent.fingerprint);

  // A subject beyond Latin-1 and a bare '?' pass the gateway's verifier.
  const zoe = await idnFetch(agent, { subject: "Zoë Müller · 山田 🤖" })(`${env.IDN_IT_GATEWAY}/proxy/${env.IDN_IT_REST}/forecast?`);
  assert.equal(zoe.status, 200, await zoe.clone().text());
  assert.equal((await zoe.json()).city, "");

  // An upstream's forged claim is a plain 403: no claim, no wait.
  const forged = await readError(await f(`${env.IDN_IT_GATEWAY}/proxy/${env.IDN_IT_REST}/forged`));
  assert.equal(forged.code, "HTTP_403");
  assert.equal(forged.claimId, undefined);
  assert.equal(forged.envelope.claim_id, "clm_stranger");

  // An upstream's redirect to another port is followed without a signature.
  const moved = await f(`${env.IDN_IT_GATEWAY}/proxy/${env.IDN_IT_REST}/moved`, { method: "POST", body: "secret", redirect: "follow" });
  assert.deepEqual(await moved.json(), { landed: true, signing_headers: [], body_bytes: 0 });

  const client = new Client({ name: "idn-sdk-it", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${env.IDN_IT_GATEWAY}/mcp/${env.IDN_IT_MCP}`), { fetch: f }));
  const { tools } = await client.listTools();
  assert.ok(tools.some((t) => t.name === "weather.now"), JSON.stringify(tools));
  const result = await client.callTool({ name: "weather.now", arguments: { city: "Oslo" } });
  assert.equal(result.content[0].text, "sunny in Oslo");
  await client.close();

  const nsInfo = await throwIfError(await f(`${env.IDN_IT_CONTROLPLANE}/v1/namespaces/${ns}`));
  assert.equal((await nsInfo.json()).namespace, ns);

  // A service that verifies agents itself, with the control plane's claim
  // check: a new key is refused with a claim the owner approves, as at the gateway.
  const service = withIdnAgent((req, who) => Response.json({ hello: who.subject, key: who.fingerprint }), {
    nonces: new MemoryNonceStore(),
    claims: controlPlaneClaims({ controlPlane: env.IDN_IT_CONTROLPLANE, apiKey: env.IDN_IT_API_KEY, service: env.IDN_IT_SERVICE, identity: await Identity.create("weather-service") }),
  });
  const second = await Identity.create(ns, { name: "Direct caller" });
  const direct = idnFetch(second, { subject: "Zoë", fetch: (input, init) => service(new Request(input, init)) });
  const asked = await readError(await direct("https://weather.example/forecast"));
  assert.equal(asked?.code, "AUTH_CLAIM_REQUIRED", String(asked));
  assert.match(asked.claimId, /^clm_/);
  assert.notEqual(asked.claimId, refusal.claimId, "a claim for the second key");
  const ok2 = await fetch(`${env.IDN_IT_APPROVE}?namespace=${ns}&claim=${asked.claimId}`, { method: "POST" });
  assert.equal(ok2.status, 200, await ok2.text());
  const admitted = await throwIfError(await waitForApproval(() => direct("https://weather.example/forecast"), { initialDelayMs: 100, timeoutMs: 30_000 }));
  assert.deepEqual(await admitted.json(), { hello: "Zoë", key: second.fingerprint });
});
