// Drives a gateway's MCP connection with the official TypeScript MCP SDK,
// a client written independently of the gateway:
//
//   node mcp_client.mjs stdio GATEWAY CONNECTION   through `idn mcp` ($IDN_BINARY)
//   node mcp_client.mjs http  GATEWAY CONNECTION   over Streamable HTTP, signed by idnsign.mjs
//
// It lists the tools, calls one, calls one that reports progress, and
// tries a denied tool and invalid arguments, then prints what it saw as
// JSON for the Go test to check.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { signingFetch } from './idnsign.mjs';

const require = createRequire(join(process.env.IDN_NODE_MODULES, 'noop.js'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

const [mode, gateway, connection] = process.argv.slice(2);
const transport = mode === 'stdio'
  ? new StdioClientTransport({
    command: process.env.IDN_BINARY,
    args: ['mcp', '--gateway', gateway, '--connection', connection],
    env: { ...process.env },
    stderr: 'inherit',
  })
  : new StreamableHTTPClientTransport(new URL(`${gateway}/mcp/${connection}`), {
    fetch: signingFetch(process.env.IDN_IDENTITY_FILE, process.env.IDN_SUBJECT),
  });

const client = new Client({ name: 'ts-sdk-interop', version: '1.0.0' });
await client.connect(transport);
const out = { server: client.getServerVersion(), capabilities: client.getServerCapabilities() };
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.call = await client.callTool({ name: 'docs.search', arguments: { text: 'hello' } });
const progress = [];
out.slow = await client.callTool({ name: 'slow.count', arguments: { n: 3 } }, undefined, {
  onprogress: (p) => progress.push(p),
});
out.progress = progress;
try {
  await client.callTool({ name: 'admin.wipe', arguments: { text: 'x' } });
  out.denied = 'called';
} catch (err) {
  out.denied = { code: err.code, data: err.data };
}
out.invalid = await client.callTool({ name: 'docs.search', arguments: { text: 5 } });
await client.ping();
await client.close();
process.stdout.write(JSON.stringify(out));
