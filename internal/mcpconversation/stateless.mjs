// Holds one conversation of MCP's stateless revision (2026-07-28) with a
// server, using the TypeScript SDK v2 client (@modelcontextprotocol/client),
// a client written independently of the gateway, and prints every answer
// it got as JSON, in order:
//
//   node stateless.mjs URL [HEADER=VALUE...]    over Streamable HTTP
//   node stateless.mjs stdio COMMAND [ARG...]   over stdio, to COMMAND
//
// Over HTTP, with IDN_SIGNER naming a module whose signingFetch(file,
// subject) wraps fetch, every request is signed with the identity record
// at IDN_IDENTITY_FILE.
//
// The server is expected to offer the tools "echo" and "confirm", the
// prompt "greet" and the resource file:///readme; "confirm" asks the
// client to confirm (elicitation), which the client answers through its
// handler, the SDK running the rounds. A server that offers completions
// is asked to complete the prompt's argument "who".
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(join(process.env.IDN_NODE_MODULES, 'noop.js'));
const { Client, StreamableHTTPClientTransport } = require('@modelcontextprotocol/client');
const { StdioClientTransport } = require('@modelcontextprotocol/client/stdio');

const [url, ...rest] = process.argv.slice(2);
const client = new Client({ name: 'ts-sdk-v2-conversation', version: '1.0.0' }, {
  capabilities: { elicitation: { form: {} } },
  versionNegotiation: { mode: { pin: '2026-07-28' } },
});
const steps = [];
client.setRequestHandler('elicitation/create', async (req) => {
  steps.push({ asked: req.method, message: req.params.message, requestedSchema: req.params.requestedSchema });
  return { action: 'accept', content: { ok: true } };
});
const step = async (name, f) => {
  try {
    steps.push({ step: name, result: await f() });
  } catch (e) {
    steps.push({ step: name, error: { code: e.code, message: String(e.message) } });
  }
};
const transport = url === 'stdio'
  ? new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: { ...process.env }, stderr: 'inherit' })
  : new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: Object.fromEntries(rest.map((h) => h.split('=', 2))) },
    ...(process.env.IDN_SIGNER && {
      fetch: (await import(pathToFileURL(process.env.IDN_SIGNER))).signingFetch(process.env.IDN_IDENTITY_FILE),
    }),
  });
await client.connect(transport);
steps.push({ step: 'connect', protocolVersion: client.getNegotiatedProtocolVersion(), era: client.getProtocolEra(), capabilities: client.getServerCapabilities() });
await step('tools/list', () => client.listTools());
await step('tools/call echo', () => client.callTool({ name: 'echo', arguments: { text: 'hi' } }));
await step('tools/call confirm', () => client.callTool({ name: 'confirm', arguments: { text: 'the report' } }));
await step('tools/call missing', () => client.callTool({ name: 'missing', arguments: {} }));
await step('prompts/list', () => client.listPrompts());
await step('prompts/get', () => client.getPrompt({ name: 'greet', arguments: { who: 'alice' } }));
await step('resources/list', () => client.listResources());
await step('resources/read', () => client.readResource({ uri: 'file:///readme' }));
if (client.getServerCapabilities()?.completions) {
  await step('completion/complete', () => client.complete({ ref: { type: 'ref/prompt', name: 'greet' }, argument: { name: 'who', value: 'al' } }));
}
await client.close();
process.stdout.write(JSON.stringify(steps));
