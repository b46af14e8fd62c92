// fs.globSync arrived in Node 22. The conformance runner imports it by
// name (for "**/checks.json" under a results folder, in its tier check)
// and does not load on Node 20 without it. Loaded with --import, this
// module resolves the runner's "fs" to fs itself plus a globSync of the
// one form the runner uses.
import { register } from 'node:module';
import fs from 'node:fs';

if (typeof fs.globSync !== 'function') {
  register(new URL('./globsync-hooks.mjs', import.meta.url));
}
