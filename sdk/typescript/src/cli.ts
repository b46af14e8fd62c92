#!/usr/bin/env node
// The package's command: `npx @idnhq/idn init <namespace> [--name NAME]
// [--force] [--json]` writes the identity `idn init` writes, in the same
// place, and says what comes next.

import { Identity, home } from "./identity.js";
import { validateName, validateNamespace } from "./rules.js";

const USAGE = "usage: npx @idnhq/idn init <namespace> [--name NAME] [--force] [--json]";

/** A mistake in how the command was called (exit status 2). */
class UsageError extends Error {}

interface InitArgs {
  namespace: string;
  name: string | undefined;
  force: boolean;
  json: boolean;
}

function parse(argv: string[]): InitArgs {
  const [command, ...rest] = argv;
  if (command !== "init") throw new UsageError(USAGE);
  const pos: string[] = [];
  const out: InitArgs = { namespace: "", name: undefined, force: false, json: false };
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if (a === "--force") out.force = true;
    else if (a === "--json") out.json = true;
    else if (a === "--name") {
      if (i + 1 >= rest.length) throw new UsageError("--name needs a value");
      out.name = rest[++i];
    } else if (a.startsWith("--name=")) out.name = a.slice("--name=".length);
    else if (a.startsWith("-")) throw new UsageError(`unknown flag ${a}\n${USAGE}`);
    else pos.push(a);
  }
  if (pos.length !== 1) throw new UsageError(USAGE);
  out.namespace = pos[0]!;
  try {
    validateNamespace(out.namespace);
    if (out.name) validateName(out.name);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  return out;
}

/** What to do next, for a developer who has just made an identity. */
function nextSteps(id: Identity): string {
  return `
Next:
  A namespace belongs to an owner: the person who signed up with it on the
  control plane's dashboard, and who approves the agents that sign under it.
  Sign under your owner's namespace (the quickstart's is quickstart-agent);
  a namespace nobody signed up with is answered 404 NAMESPACE_NOT_FOUND.

  The first request through a gateway is refused with 403
  AUTH_CLAIM_REQUIRED and files a claim; the owner approves it on the
  dashboard's claims page, where this key shows as ${id.fingerprint}.
  waitForApproval (TypeScript) or wait_for_approval (Python) waits for that.
`;
}

async function init(a: InitArgs, print: (s: string) => void): Promise<void> {
  const fs = await import("node:fs/promises");
  const path = await Identity.path(a.namespace);
  let exists = true;
  try {
    await fs.stat(path);
  } catch {
    exists = false;
  }
  let id: Identity;
  let verb = "Created";
  if (exists && !a.force) {
    if (!a.name) throw new Error(`idn: an identity for "${a.namespace}" already exists at ${path}; use --force to replace it, or --name to rename it`);
    id = await Identity.load(a.namespace);
    await id.rename(a.name);
    verb = "Renamed";
  } else {
    id = await Identity.create(a.namespace, a.name ? { name: a.name } : {});
  }
  await id.save();
  if (a.json) {
    print(JSON.stringify({ namespace: id.namespace, name: id.name ?? "", did: id.did, keyId: id.keyId, publicKey: id.publicKey, fingerprint: id.fingerprint, file: path }, null, 2) + "\n");
    return;
  }
  print(`${verb} identity ${id.namespace}
Namespace:   ${id.namespace}
Name:        ${id.name ?? `(none; set one with npx @idnhq/idn init ${id.namespace} --name NAME)`}
DID:         ${id.did}
Key id:      ${id.keyId}
Public key:  ${id.publicKey}
Fingerprint: ${id.fingerprint}
File:        ${path}
Home:        ${await home()}
${nextSteps(id)}`);
}

declare const process: {
  argv: string[];
  exitCode: number | undefined;
  stdout: { write(s: string): void };
  stderr: { write(s: string): void };
};

try {
  await init(parse(process.argv.slice(2)), (s) => process.stdout.write(s));
} catch (e) {
  const msg = (e as Error).message;
  process.stderr.write(`${msg.startsWith("idn: ") ? msg : "idn: " + msg}\n`);
  process.exitCode = e instanceof UsageError ? 2 : 1;
}
