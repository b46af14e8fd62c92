// Resolve hooks for globsync.mjs: "fs" and "node:fs" resolve to fs.mjs,
// except from fs.mjs itself.
const shim = new URL('./fs.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL !== shim) {
    return { url: shim, shortCircuit: true };
  }
  return next(specifier, context);
}
