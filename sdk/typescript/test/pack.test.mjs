// npm pack yields a tarball that installs into an empty project (no
// registry needed: the package has no dependencies) and works there, from
// JavaScript and from type-checked TypeScript.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

test("the packed tarball installs into an empty project and signs there", () => {
  const work = mkdtempSync(join(tmpdir(), "idn-pack-"));
  const out = execFileSync(npm, ["pack", "--json", "--pack-destination", work], { cwd: pkgDir, encoding: "utf8" });
  const [info] = JSON.parse(out);
  const files = info.files.map((f) => f.path).sort();
  assert.ok(files.includes("dist/index.js") && files.includes("dist/index.d.ts"), files.join(" "));
  assert.ok(!files.some((f) => f.startsWith("src/") || f.startsWith("test/")), files.join(" "));
  const tarball = join(work, info.filename);

  const app = join(work, "app");
  execFileSync("mkdir", [app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  execFileSync(npm, ["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", tarball], { cwd: app });
  assert.deepEqual(readdirSync(join(app, "node_modules")).filter((n) => !n.startsWith(".")).sort(), ["@idnhq"], "no runtime dependencies");

  writeFileSync(join(app, "main.mjs"), `
    import { Identity, idnFetch, IdnError, waitForApproval } from "@idnhq/idn";
    const id = await Identity.create("packed-agent", { name: "Packed" });
    const h = await id.sign({ method: "POST", url: "https://gw.example/proxy/x", body: "{}" });
    console.log(JSON.stringify({ ns: h["idn-namespace"], digest: !!h["content-digest"], fetch: typeof idnFetch(id), err: typeof IdnError, wait: typeof waitForApproval }));
  `);
  const printed = JSON.parse(execFileSync(process.execPath, ["main.mjs"], { cwd: app, encoding: "utf8" }));
  assert.deepEqual(printed, { ns: "packed-agent", digest: true, fetch: "function", err: "function", wait: "function" });

  // The package's command, as npx runs it.
  const home = join(work, "home");
  const made = execFileSync(join(app, "node_modules", ".bin", "idn"), ["init", "packed-cli", "--name", "Packed CLI"], { cwd: app, env: { ...process.env, IDN_HOME: home }, encoding: "utf8" });
  assert.match(made, /^Created identity packed-cli\n/);
  assert.ok(readdirSync(join(home, "identities")).includes("packed-cli"));

  // The type declarations serve a strict TypeScript consumer.
  writeFileSync(join(app, "main.ts"), `
    import { Identity, idnFetch, IdnError, type SignedHeaders } from "@idnhq/idn";
    export async function run(): Promise<string> {
      const id: Identity = await Identity.create("typed-agent");
      const h: SignedHeaders = await id.sign({ method: "GET", url: new URL("https://gw.example/") });
      const f: (u: string) => Promise<Response> = (u) => idnFetch(id)(u);
      const claim = (e: IdnError | undefined): string => e?.claimId ?? "";
      return h.signature + String(f) + claim(undefined);
    }
  `);
  writeFileSync(join(app, "tsconfig.json"), JSON.stringify({ compilerOptions: { strict: true, module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", lib: ["ES2022", "DOM"], types: [], noEmit: true }, files: ["main.ts"] }));
  execFileSync(process.execPath, [join(pkgDir, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], { cwd: app, encoding: "utf8" });
});
