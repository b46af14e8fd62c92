// fs with a globSync for "**/<name>" relative to options.cwd (Node 20).
import fs from 'node:fs';
import path from 'node:path';

export * from 'node:fs';
export default fs;

export function globSync(pattern, options = {}) {
  const m = /^\*\*\/([^*?[\]{}/]+)$/.exec(pattern);
  if (!m) {
    throw new Error(`globSync (Node 20 shim): only "**/<name>" is supported, not ${pattern}`);
  }
  const root = options.cwd || process.cwd();
  const found = [];
  const walk = (rel) => {
    for (const entry of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const child = rel ? path.join(rel, entry.name) : entry.name;
      if (entry.isDirectory()) {
        walk(child);
      } else if (entry.name === m[1]) {
        found.push(child);
      }
    }
  };
  walk('');
  return found;
}
