// Expands the JSON-LD document on standard input with jsonld.js in safe
// mode, loading contexts only from the files named on the command line as
// url=path pairs (no network). Prints the expanded form; exits 1 with the
// processor's message when expansion fails or drops a term.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const require = createRequire(join(process.env.IDN_NODE_MODULES, 'noop.js'));
const jsonld = require('jsonld');

const contexts = new Map(process.argv.slice(2).map((pair) => {
  const i = pair.indexOf('=');
  return [pair.slice(0, i), JSON.parse(readFileSync(pair.slice(i + 1), 'utf8'))];
}));
const documentLoader = async (url) => {
  if (!contexts.has(url)) throw new Error(`context ${url} is not pinned`);
  return { contextUrl: null, documentUrl: url, document: contexts.get(url) };
};

const input = JSON.parse(readFileSync(0, 'utf8'));
try {
  const expanded = await jsonld.expand(input, { safe: true, documentLoader });
  process.stdout.write(JSON.stringify(expanded));
} catch (err) {
  process.stderr.write(`${err.name}: ${err.message}\n${JSON.stringify(err.details ?? {})}\n`);
  process.exit(1);
}
