// mcp_sdk_tasks.mjs runs device calls as MCP tasks (revision
// 2025-11-25) through aip-server's /mcp with the official TypeScript
// SDK's client (npm @modelcontextprotocol/sdk), through its task API
// (client.experimental.tasks): a task on an online device, with progress;
// a task on an offline device, which it waits for; and a task cancelled
// half-way. Every call goes through the SDK; the only thing read off the
// wire is the _meta of the progress notifications, which the SDK's
// onprogress callback does not pass on, to see them name their task.
//
// It prints one JSON line per event, which e2e/mcp_tasks_test.go reads:
// {"offline": taskId} once the offline device's task exists (the test
// then starts that device's agent), and the whole outcome last.
//
// Environment: SDK_DIR, MCP_URL, MCP_TOKEN, DEVICE (online), OFFLINE
// (offline).
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const sdk = (p) => import(pathToFileURL(join(process.env.SDK_DIR, "dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { CallToolResultSchema } = await sdk("types.js");

const say = (o) => console.log(JSON.stringify(o));
const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
});
const client = new Client({ name: "sdk-tasks-e2e", version: "1.0.0" });
await client.connect(transport);
const related = [];
const onmessage = transport.onmessage;
transport.onmessage = (m, extra) => {
  if (m.method === "notifications/progress") related.push(m.params?._meta?.["io.modelcontextprotocol/related-task"]?.taskId ?? null);
  onmessage(m, extra);
};
const out = { capabilities: client.getServerCapabilities().tasks };
const { tools } = await client.listTools();
out.taskSupport = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport ?? null]));

let current; // what drive sees, for onCreated
// drive runs a tool as a task through callToolStream, to its end.
async function drive(name, args, ttl, onCreated) {
  const seen = { statuses: [], progress: 0 };
  current = seen;
  const stream = client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, {
    task: { ttl },
    onprogress: () => { seen.progress++; },
    timeout: 120000,
  });
  for await (const m of stream) {
    if (m.type === "taskCreated") {
      seen.created = m.task;
      await onCreated?.(m.task);
    } else if (m.type === "taskStatus") {
      seen.statuses.push(m.task.status);
    } else if (m.type === "result") {
      seen.result = m.result;
    } else if (m.type === "error") {
      seen.error = String(m.error);
    }
  }
  return seen;
}

// 1. An online device: the task completes with the tool's result.
out.online = await drive("call_device_tool", { device: process.env.DEVICE, tool: "pause", arguments: { ms: 1500 } }, 60000);
out.online.got = await client.experimental.tasks.getTask(out.online.created.taskId);
out.online.relatedProgress = related.filter((id) => id === out.online.created.taskId).length;

// 2. An offline device: the task waits for it, and completes once its
// agent starts again, which the test does once it reads {"offline": id}.
out.offline = await drive("call_device_tool", { device: process.env.OFFLINE, tool: "pause", arguments: { ms: 1 } }, 120000, async (task) => {
  current.waiting = await client.experimental.tasks.getTask(task.taskId);
  say({ offline: task.taskId });
});
out.offline.got = await client.experimental.tasks.getTask(out.offline.created.taskId);

// 3. A task cancelled half-way: the spin it runs on its device stops.
out.cancel = await drive("call_device_tool", { device: process.env.DEVICE, tool: "spin", timeout: "5m" }, 300000, async (task) => {
  while (current.progress === 0) await new Promise((r) => setTimeout(r, 50)); // "spin sent"
  await new Promise((r) => setTimeout(r, 1000)); // let it spin
  current.cancelled = await client.experimental.tasks.cancelTask(task.taskId);
});

const listed = await client.experimental.tasks.listTasks();
out.listed = listed.tasks.map((t) => t.taskId);
await client.close();
say(out);
