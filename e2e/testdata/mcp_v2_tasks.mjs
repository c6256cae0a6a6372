// mcp_v2_tasks.mjs runs device calls as MCP tasks over revision
// 2026-07-28's tasks extension: the v2 client (npm
// @modelcontextprotocol/client, pinned to 2026-07-28) discovers the
// server, and the extension's own requester (npm
// @modelcontextprotocol/ext-tasks) calls the tools as tasks, polls
// tasks/get and cancels with tasks/cancel: a task on an online device; a
// task on an offline device, which it waits for; and a task cancelled
// half-way.
//
// The v2 client has no task wire of its own: ext-tasks sends the task
// requests (tools/call with the extension declared, tasks/get,
// tasks/cancel) through the rawDispatch it is given, which here is a
// plain JSON-RPC POST to the same endpoint with the same token, as its
// README says a host provides one.
//
// It prints one JSON line per event, which e2e/mcp_tasks_test.go reads:
// {"offline": taskId} once the offline device's task exists (the test
// then starts that device's agent), and the whole outcome last.
//
// Environment: CLIENT_DIR, TASKS_DIR, MCP_URL, MCP_TOKEN, DEVICE
// (online), OFFLINE (offline).
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const load = (dir, p) => import(pathToFileURL(join(dir, p)).href);
const { Client, StreamableHTTPClientTransport } = await load(process.env.CLIENT_DIR, "dist/index.mjs");
const { createTaskSessionFromClient } = await load(process.env.TASKS_DIR, "dist/client/index.js");

const say = (o) => console.log(JSON.stringify(o));
const version = "2026-07-28";
const headers = { Authorization: `Bearer ${process.env.MCP_TOKEN}` };
const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), { requestInit: { headers } });
const clientInfo = { name: "v2-tasks-e2e", version: "1.0.0" };
const client = new Client(clientInfo, { versionNegotiation: { mode: { pin: version } } });
await client.connect(transport);
const out = { protocolVersion: client.getNegotiatedProtocolVersion(), extensions: client.getServerCapabilities().extensions };

let id = 0;
const wire = [];
// rawDispatch sends one JSON-RPC request as the Streamable HTTP
// transport would, with the routing headers 2026-07-28 asks for.
async function rawDispatch(request) {
  const taskId = request.params?.taskId;
  wire.push({ method: request.method, taskId });
  const res = await fetch(process.env.MCP_URL, {
    method: "POST",
    headers: {
      ...headers, "Content-Type": "application/json", Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": version, "Mcp-Method": request.method,
      ...(taskId ? { "Mcp-Name": taskId } : request.params?.name ? { "Mcp-Name": request.params.name } : {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: ++id, ...request }),
  });
  const msg = await res.json();
  return msg.error ? { kind: "error", error: msg.error } : { kind: "result", result: msg.result };
}

const session = createTaskSessionFromClient(client, {
  endpointId: "aip-server",
  rawDispatch,
  v2RequestFraming: { protocolVersion: version, clientInfo, clientCapabilities: {} },
});

// run calls a tool through the session; during, if given, runs once its
// task exists.
async function run(name, args, during) {
  const seen = {};
  try {
    const execution = await session.callTool(name, args);
    seen.kind = execution.kind;
    seen.taskId = execution.handle?.taskId;
    await during?.(execution, seen);
    const { outcome, lastTask } = await execution.settle();
    seen.outcome = outcome;
    seen.lastTask = lastTask?.raw;
  } catch (e) {
    seen.error = String(e);
  }
  return seen;
}

out.online = await run("call_device_tool", { device: process.env.DEVICE, tool: "pause", arguments: { ms: 500 } });
out.offline = await run("call_device_tool", { device: process.env.OFFLINE, tool: "pause", arguments: { ms: 1 } }, async (_, seen) => {
  say({ offline: seen.taskId });
});
out.cancel = await run("call_device_tool", { device: process.env.DEVICE, tool: "spin", timeout: "5m" }, async (execution) => {
  await new Promise((r) => setTimeout(r, 1500)); // let it spin
  await execution.cancel();
});
out.wire = wire;
await session.close();
await client.close();
say(out);
