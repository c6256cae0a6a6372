// mcp_sdk_client.mjs drives aip-server's /mcp with the official
// TypeScript SDK's client (npm @modelcontextprotocol/sdk), as an MCP
// application would: tools/list, call_device_tool with progress, a
// DEVICE__TOOL call, and a call it cancels. It prints what it saw as one
// JSON object; e2e/mcp_clients_test.go checks it.
//
// Environment: SDK_DIR (the package's directory), MCP_URL, MCP_TOKEN,
// DEVICE.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const sdk = (p) => import(pathToFileURL(join(process.env.SDK_DIR, "dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const device = process.env.DEVICE;
const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
});
const client = new Client({ name: "sdk-e2e", version: "1.0.0" });
await client.connect(transport);
const out = { protocolVersion: transport.protocolVersion };

const { tools } = await client.listTools();
out.tools = tools.map((t) => t.name);

let progress = 0;
const called = await client.callTool(
  { name: "call_device_tool", arguments: { device, tool: "pause", arguments: { ms: 2500 } } },
  undefined,
  { onprogress: () => { progress++; }, resetTimeoutOnProgress: true },
);
out.call = { isError: called.isError ?? false, status: called.structuredContent?.status, fuel: called.structuredContent?.usage?.fuel, progress };

const direct = await client.callTool({ name: `${device}__pause`, arguments: { ms: 1 } });
out.direct = { isError: direct.isError ?? false, result: direct.structuredContent?.result };

const abort = new AbortController();
setTimeout(() => abort.abort("the user changed their mind"), 1500);
try {
  await client.callTool({ name: "call_device_tool", arguments: { device, tool: "spin", timeout: "5m" } }, undefined, { signal: abort.signal });
  out.cancelled = false;
} catch (e) {
  out.cancelled = true;
  out.cancelError = String(e);
}
await client.close();
console.log(JSON.stringify(out));
