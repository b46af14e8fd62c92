// Expands the JSON-LD document on standard input with jsonld.js in safe
// mode, loading contexts only from the files named on the command line as
// url=path pairs (no network). Prints the expanded form; exits 1 with the
// processor's message when expansion fails, or when the expanded form
// holds a relative IRI: safe mode lets a value coerced to @id (a bare
// "github" under a term the context types @id) through as one.
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
  const relative = [];
  const absolute = (iri) => iri.startsWith('_:') || /^[A-Za-z][A-Za-z0-9+.-]*:/.test(iri);
  const walk = (node, at) => {
    if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${at}/${i}`));
    if (node === null || typeof node !== 'object') return;
    for (const [key, value] of Object.entries(node)) {
      if (key === '@id' && !absolute(value)) relative.push(`${at}/@id: ${JSON.stringify(value)}`);
      if (key === '@type') [].concat(value).filter((t) => !absolute(t)).forEach((t) => relative.push(`${at}/@type: ${JSON.stringify(t)}`));
      if (key !== '@value') walk(value, `${at}/${key}`);
    }
  };
  walk(expanded, '');
  if (relative.length > 0) throw Object.assign(new Error('relative IRI in the expanded form'), { details: relative });
  process.stdout.write(JSON.stringify(expanded));
} catch (err) {
  process.stderr.write(`${err.name}: ${err.message}\n${JSON.stringify(err.details ?? {})}\n`);
  process.exit(1);
}
