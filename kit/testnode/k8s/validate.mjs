// Validates Kubernetes manifests against the API's schemas, as
// kubernetes-models ships them: node validate.mjs FILE.yaml…, with
// IDN_NODE_MODULES naming the packages' folder.
// Each document must name an apiVersion and kind the package knows, and
// pass its schema (unknown fields included). Prints one line a document;
// exits 1 when any fails.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.env.IDN_NODE_MODULES;
const require = createRequire(join(modules, "noop.js"));
const { parseAllDocuments } = require("yaml");

let failed = false;
for (const file of process.argv.slice(2)) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (doc.errors.length) {
      console.log(`FAIL ${file}: ${doc.errors[0].message}`);
      failed = true;
      continue;
    }
    const obj = doc.toJS();
    if (obj == null) continue;
    const name = `${file}: ${obj.kind} ${obj.metadata?.name}`;
    const [group, version] = obj.apiVersion?.includes("/") ? obj.apiVersion.split("/") : ["", obj.apiVersion];
    let Model;
    try {
      const file = join(modules, "kubernetes-models", group, version, `${obj.kind}.js`);
      Model = (await import(pathToFileURL(file).href))[obj.kind];
    } catch {
      console.log(`FAIL ${name}: no schema for ${obj.apiVersion} ${obj.kind}`);
      failed = true;
      continue;
    }
    try {
      new Model(obj).validate();
      console.log(`ok   ${name}`);
    } catch (err) {
      console.log(`FAIL ${name}: ${err.message}`);
      failed = true;
    }
  }
}
process.exit(failed ? 1 : 0);
