// Starts `idn mcp` ($IDN_BINARY) with the official TypeScript MCP SDK
// client for an agent whose claim awaits approval:
//
//   node mcp_await.mjs GATEWAY CONNECTION
//
// It prints, one JSON line each, what it saw before the approval
// (instructions, tools), then, once the Go test approved the claim and
// idn mcp sent tools/list_changed, what it saw after (the log message,
// the tools, a call).
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(join(process.env.IDN_NODE_MODULES, 'noop.js'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { ToolListChangedNotificationSchema, LoggingMessageNotificationSchema } = require('@modelcontextprotocol/sdk/types.js');

const [gateway, connection] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: process.env.IDN_BINARY,
  args: ['mcp', '--gateway', gateway, '--connection', connection, '--retry', '50ms'],
  env: { ...process.env },
  stderr: 'inherit',
});
const client = new Client({ name: 'ts-sdk-await', version: '1.0.0' });
let changed;
const listChanged = new Promise((resolve) => { changed = resolve; });
client.setNotificationHandler(ToolListChangedNotificationSchema, () => changed());
const logged = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logged.push(n.params.data));
await client.connect(transport);
const before = {
  instructions: client.getInstructions(),
  capabilities: client.getServerCapabilities(),
  tools: (await client.listTools()).tools.map((t) => t.name),
};
process.stdout.write(JSON.stringify(before) + '\n');
await listChanged;
const after = { logged, tools: (await client.listTools()).tools.map((t) => t.name) };
after.call = await client.callTool({ name: 'docs.search', arguments: { text: 'hello' } });
process.stdout.write(JSON.stringify(after) + '\n');
await client.close();
