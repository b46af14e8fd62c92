// `npx @idnhq/idn init` writes the identity `idn init` writes, and says
// what comes next.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Identity } from "../dist/index.js";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));

function run(home, ...args) {
  return spawnSync(process.execPath, [cli, ...args], { env: { ...process.env, IDN_HOME: home }, encoding: "utf8" });
}

test("init creates, refuses to overwrite, renames with the same key, and explains the namespace", async () => {
  const home = mkdtempSync(join(tmpdir(), "idn-cli-"));
  const made = run(home, "init", "cli-agent", "--name", "CLI bot");
  assert.equal(made.status, 0, made.stderr);
  const id = await Identity.load("cli-agent", { home });
  assert.equal(id.name, "CLI bot");
  assert.equal(statSync(join(home, "identities", "cli-agent", "identity.json")).mode & 0o777, 0o600);
  assert.match(made.stdout, /^Created identity cli-agent\n/);
  assert.ok(made.stdout.includes(id.fingerprint) && made.stdout.includes(id.keyId));
  assert.match(made.stdout, /quickstart-agent/);
  assert.match(made.stdout, /NAMESPACE_NOT_FOUND/);
  assert.match(made.stdout, /AUTH_CLAIM_REQUIRED/);

  const again = run(home, "init", "cli-agent");
  assert.equal(again.status, 1);
  assert.match(again.stderr, /already exists.*--force.*--name/);

  const renamed = run(home, "init", "cli-agent", "--name=Billing bot", "--json");
  assert.equal(renamed.status, 0, renamed.stderr);
  const shown = JSON.parse(renamed.stdout);
  assert.equal(shown.name, "Billing bot");
  assert.equal(shown.publicKey, id.publicKey, "a rename keeps the key");

  const replaced = run(home, "init", "cli-agent", "--force");
  assert.equal(replaced.status, 0, replaced.stderr);
  assert.notEqual((await Identity.load("cli-agent", { home })).publicKey, id.publicKey);

  for (const args of [["init", "x"], ["init"], ["init", "ok-agent", "--name", " spaced "], ["whoami"], ["init", "ok-agent", "--bogus"]]) {
    const r = run(home, ...args);
    assert.equal(r.status, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, /^idn: /);
  }
});
