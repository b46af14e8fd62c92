// Holds one conversation with an MCP server using the official
// TypeScript MCP SDK, a client written independently of the gateway, and
// prints every answer it got as JSON, in order:
//
//   node conversation.mjs http URL [HEADER=VALUE...]     Streamable HTTP
//   node conversation.mjs stdio GATEWAY CONNECTION       through `idn mcp` ($IDN_BINARY)
//
// With CONVERSATION_CAPS=roots the client declares roots alone: the
// server then offers no sampling or elicitation tools, and the gateway
// answers its calls as single JSON bodies instead of event streams.
//
// The Go test runs it against the reference "everything" server directly
// and through the gateway, and compares the two transcripts message by
// message. The client declares sampling, elicitation and roots, and
// answers the server's requests with fixed answers it also records. It
// runs tasks too (MCP 2025-11-25): a task-augmented call, the task's
// status, result, status notification, listing and cancellation, and a
// task that asks for input while its result is awaited; and, declaring
// the client side of tasks (with sampling and elicitation), it runs the
// server's task-augmented sampling and elicitation as tasks of its own,
// which the server polls and fetches.
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(join(process.env.IDN_NODE_MODULES, 'noop.js'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const {
  CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema,
  CreateTaskResultSchema, CallToolResultSchema,
} = require('@modelcontextprotocol/sdk/types.js');
const { InMemoryTaskStore } = require('@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js');

const [mode, url, ...rest] = process.argv.slice(2);

const rootsOnly = process.env.CONVERSATION_CAPS === 'roots';
const taskStore = new InMemoryTaskStore();
const client = new Client({ name: 'ts-sdk-conversation', version: '1.0.0' }, {
  capabilities: rootsOnly
    ? { roots: { listChanged: true } }
    : {
      sampling: {}, elicitation: { form: {} }, roots: { listChanged: true },
      tasks: { list: {}, cancel: {}, requests: { sampling: { createMessage: {} }, elicitation: { create: {} } } },
    },
  ...(rootsOnly ? {} : { taskStore }),
});
// What the server asks and says while a step runs, in the order it came.
let events = [];
const strip = (params) => {
  const { _meta, ...rest } = params ?? {};
  return rest;
};
// A request the server asks for as a task is answered with the task,
// working, whose result is then stored at once; the SDK answers the
// server's tasks/get (completed) and tasks/result about it.
const answered = async (req, extra, result) => {
  if (!req.params.task) return result;
  const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl });
  const working = { ...task };
  await extra.taskStore.storeTaskResult(task.taskId, 'completed', result);
  return { task: working };
};
if (!rootsOnly) {
  client.setRequestHandler(CreateMessageRequestSchema, async (req, extra) => {
    events.push({ asked: req.method, params: strip(req.params) });
    return answered(req, extra, { model: 'fixed-model', role: 'assistant', content: { type: 'text', text: 'a sampled answer' }, stopReason: 'endTurn' });
  });
  client.setRequestHandler(ElicitRequestSchema, async (req, extra) => {
    events.push({ asked: req.method, params: strip(req.params) });
    return answered(req, extra, { action: 'decline' });
  });
}
// The server asks for the roots once it is initialized, on the session's
// own stream; the conversation waits for that first.
let rootsAsked;
const firstRoots = new Promise((resolve) => { rootsAsked = resolve; });
client.setRequestHandler(ListRootsRequestSchema, async (req) => {
  events.push({ asked: req.method });
  rootsAsked();
  return { roots: [{ uri: 'file:///work/project', name: 'project' }] };
});
// Notifications come in on the session's own stream at times of the
// server's choosing; steps wait for the ones they expect, in order.
const told = [];
const waiting = [];
client.fallbackNotificationHandler = async (n) => {
  told.push(n);
  for (const w of waiting.splice(0)) w();
};
async function next(method) {
  for (;;) {
    const i = told.findIndex((n) => n.method === method);
    if (i >= 0) return { told: method, params: strip(told.splice(i, 1)[0].params) };
    await new Promise((resolve) => waiting.push(resolve));
  }
}

const transport = mode === 'stdio'
  ? new StdioClientTransport({
    command: process.env.IDN_BINARY,
    args: ['mcp', '--gateway', url, '--connection', rest[0]],
    env: { ...process.env },
    stderr: 'inherit',
  })
  : new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: Object.fromEntries(rest.map((h) => h.split('=', 2))) },
  });
await client.connect(transport);

const steps = [];
async function step(name, fn) {
  events = [];
  const entry = { step: name };
  try {
    entry.result = await fn();
  } catch (err) {
    entry.error = { code: err.code, message: err.message };
  }
  const asked = events.filter((e) => e.asked);
  if (asked.length) entry.asked = asked;
  steps.push(entry);
}

await step('initialize', async () => ({
  capabilities: client.getServerCapabilities(),
  instructions: client.getInstructions(),
  protocolVersion: transport.protocolVersion,
}));
await step('roots/list asked by the server', () => firstRoots);
await step('tools/list', () => client.listTools());
await step('prompts/list', () => client.listPrompts());
await step('resources/list', () => client.listResources());
await step('resources/templates/list', () => client.listResourceTemplates());
await step('resources/read', () => client.readResource({ uri: 'demo://resource/static/document/architecture.md' }));
await step('resources/read template', () => client.readResource({ uri: 'demo://resource/dynamic/text/1' }));
await step('prompts/get', () => client.getPrompt({ name: 'simple-prompt' }));
await step('prompts/get args', () => client.getPrompt({ name: 'args-prompt', arguments: { city: 'Lyon', state: 'Rhone' } }));
await step('completion/complete', () => client.complete({
  ref: { type: 'ref/prompt', name: 'completable-prompt' }, argument: { name: 'department', value: 'E' },
}));
await step('logging/setLevel', () => client.setLoggingLevel('info'));
await step('resources/subscribe', () => client.subscribeResource({ uri: 'demo://resource/dynamic/text/1' }));
await step('the log of the subscription', () => next('notifications/message'));
await step('tools/call toggle-subscriber-updates', () => client.callTool({ name: 'toggle-subscriber-updates', arguments: {} }));
await step('a resource updated', () => next('notifications/resources/updated'));
await step('tools/call toggle-subscriber-updates off', () => client.callTool({ name: 'toggle-subscriber-updates', arguments: {} }));
await step('resources/unsubscribe', () => client.unsubscribeResource({ uri: 'demo://resource/dynamic/text/1' }));
await step('the log of the unsubscription', () => next('notifications/message'));
await step('logging/setLevel error', () => client.setLoggingLevel('error'));
const calls = [
  ['echo', { message: 'hello' }],
  ['get-sum', { a: 2, b: 40 }],
  ['get-tiny-image', {}],
  ['get-annotated-message', { messageType: 'error', includeImage: true }],
  ['get-structured-content', { location: 'New York' }],
  ['get-resource-links', { count: 2 }],
  ['get-resource-reference', { resourceType: 'Text', resourceId: 2 }],
  ['get-roots-list', {}],
  ...(rootsOnly ? [] : [
    ['trigger-sampling-request', { prompt: 'say hi', maxTokens: 10 }],
    ['trigger-elicitation-request', {}],
  ]),
  ['simulate-research-query', { topic: 'x' }, 'a task-only tool called without a task'],
  ['echo', { message: 7 }, 'invalid arguments'],
  ['no-such-tool', {}, 'unknown tool'],
];
for (const [name, args, label] of calls) {
  await step(label ?? `tools/call ${name}`, () => client.callTool({ name, arguments: args }));
}
const progress = [];
await step('tools/call with progress', async () => {
  const res = await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } }, undefined, {
    onprogress: (p) => progress.push(p),
  });
  return { res, progress };
});
// A task: created by a task-augmented call, then its status, its result
// (which waits for the end), the session's tasks, and a cancellation.
// A task's id and times differ from run to run; the Go side normalizes
// them. Its status message changes every second: only the status is kept.
const callAsTask = (args) => client.request(
  { method: 'tools/call', params: { name: 'simulate-research-query', arguments: args } },
  CreateTaskResultSchema, { task: { ttl: 60000 } });
let taskId;
await step('tools/call as a task', async () => {
  const res = await callAsTask({ topic: 'gateways' });
  taskId = res.task.taskId;
  const { statusMessage, ...task } = res.task;
  return { ...res, task };
});
await step('tasks/get', async () => {
  const { statusMessage, ...task } = await client.experimental.tasks.getTask(taskId);
  return task;
});
await step('tasks/result', () => client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema));
// The server reports each stage of the task on the session's own stream.
await step('a task status notification', () => next('notifications/tasks/status'));
await step('tasks/list', () => client.experimental.tasks.listTasks());
await step('tasks/cancel of a finished task', () => client.experimental.tasks.cancelTask(taskId));
await step('tasks/cancel', async () => {
  const created = await callAsTask({ topic: 'cancelled' });
  const { statusMessage, ...task } = await client.experimental.tasks.cancelTask(created.task.taskId);
  return task;
});
await step('tasks/get of an unknown task', () => client.experimental.tasks.getTask('no-such-task'));
if (!rootsOnly) {
  // An ambiguous query makes the task ask the client (elicitation) while
  // the client waits for its result.
  await step('tasks/result of a task that asks', async () => {
    const created = await callAsTask({ topic: 'python', ambiguous: true });
    return client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
  });
}
if (!rootsOnly) {
  // The client side of tasks: the server asks for a sampling and an
  // elicitation as tasks of the client's, polls them and fetches their
  // results. The client's task ids differ from run to run; the Go side
  // normalizes them.
  await step('tools/call trigger-sampling-request-async', () => client.callTool({
    name: 'trigger-sampling-request-async', arguments: { prompt: 'say hi', maxTokens: 10 },
  }));
  await step('tools/call trigger-elicitation-request-async', () => client.callTool({
    name: 'trigger-elicitation-request-async', arguments: {},
  }));
}
await step('ping', () => client.ping());
if (mode !== 'stdio') await transport.terminateSession();
await client.close();
taskStore.cleanup(); // its tasks' timers would keep node running
process.stdout.write(JSON.stringify(steps));
