// The official MCP TypeScript SDK's Streamable HTTP client transport takes
// idnFetch as its fetch: every request it sends (initialize, the
// notification, tools/list, tools/call) arrives signed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { once } from "node:events";
import { z } from "zod";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Identity, idnFetch } from "../dist/index.js";
import { verifyReceived } from "../test-support/verify.mjs";

test("the MCP SDK client transport sends every request signed through idnFetch", async () => {
  const verdicts = [];
  const srv = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const verdict = verifyReceived(req, body, origin);
    verdicts.push(`${req.method} ${verdict}`);
    if (verdict !== "ok") {
      res.writeHead(403, { "content-type": "application/json" }).end(JSON.stringify({ code: "AUTH_SIGNATURE_INVALID", error: verdict }));
      return;
    }
    const server = new McpServer({ name: "echo", version: "1.0.0" });
    server.registerTool("echo", { description: "echoes", inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: "text", text }] }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    await transport.handleRequest(req, res, body.length ? JSON.parse(body) : undefined);
  });
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const origin = `http://127.0.0.1:${srv.address().port}`;
  try {
    const id = await Identity.create("mcp-agent", { name: "MCP agent" });
    const client = new Client({ name: "t", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${origin}/mcp/tools`), { fetch: idnFetch(id) }));
    const tools = await client.listTools();
    assert.deepEqual(tools.tools.map((t) => t.name), ["echo"]);
    const result = await client.callTool({ name: "echo", arguments: { text: "signed hello" } });
    assert.equal(result.content[0].text, "signed hello");
    await client.close();
    const posts = verdicts.filter((v) => v.startsWith("POST"));
    assert.ok(posts.length >= 4, verdicts.join(", "));
    assert.ok(verdicts.every((v) => v.endsWith(" ok")), verdicts.join(", "));
  } finally {
    srv.close();
  }
});
