// mcp_sdk_tools.mjs lists aip-server's /mcp tools with the official
// TypeScript SDK's client (npm @modelcontextprotocol/sdk), page by page,
// and calls each kind of tool, as an MCP application would. The SDK
// parses every answer with its schemas of the MCP specification (a tool
// list that breaks them throws), and checks each call's
// structuredContent against the tool's outputSchema (one that does not
// match throws). It prints what it saw as one JSON object;
// e2e/mcp_conformance_test.go checks it.
//
// Environment: SDK_DIR (the package's directory), MCP_URL, MCP_TOKEN,
// DEVICE (online), OFFLINE (a device whose agent stopped).
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const sdk = (p) => import(pathToFileURL(join(process.env.SDK_DIR, "dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const { DEVICE: device, OFFLINE: offline } = process.env;
const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
});
const client = new Client({ name: "sdk-e2e-tools", version: "1.0.0" });
await client.connect(transport);
const out = { pages: 0, tools: {}, calls: {} };

let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  out.pages++;
  for (const t of page.tools) {
    out.tools[t.name] = { title: t.title, description: t.description, outputSchema: t.outputSchema, annotations: t.annotations };
  }
  cursor = page.nextCursor;
} while (cursor);

// Each call's answer, or the error the SDK threw (a structuredContent
// that breaks the tool's outputSchema among them).
async function call(label, name, args) {
  try {
    const r = await client.callTool({ name, arguments: args });
    out.calls[label] = { isError: r.isError ?? false, structured: r.structuredContent, text: r.content?.[0]?.text };
  } catch (e) {
    out.calls[label] = { thrown: String(e) };
  }
  return out.calls[label];
}

await call("list_devices", "list_devices", {});
await call("list_device_tools", "list_device_tools", { device });
const called = await call("call_device_tool", "call_device_tool", { device, tool: "pause", arguments: { ms: 1 } });
const task = called.text?.match(/\(task ([^)]+)\)/)?.[1];
await call("get_task", "get_task", { id: task });
await call("dispatch_plan", "dispatch_plan", { device, plan: { steps: [{ tool: "echo", parameters: { x: 1 } }] } });
await call("direct", `${device}__pause`, { ms: 1 });
await call("offline_direct", `${offline}__pause`, { ms: 1 });
await client.close();
console.log(JSON.stringify(out));
