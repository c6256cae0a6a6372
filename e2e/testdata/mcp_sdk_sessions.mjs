// mcp_sdk_sessions.mjs has the official TypeScript SDK's client (npm
// @modelcontextprotocol/sdk) end its session on aip-server's /mcp
// (DELETE), then try it again, and try a session the server never
// issued, as an MCP application coming back after a restart would. It
// prints the HTTP status of each refusal as one JSON object;
// e2e/mcp_conformance_test.go checks it.
//
// Environment: SDK_DIR (the package's directory), MCP_URL, MCP_TOKEN.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const sdk = (p) => import(pathToFileURL(join(process.env.SDK_DIR, "dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const url = new URL(process.env.MCP_URL);
const requestInit = { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } };
const out = {};

// status is the HTTP status the SDK saw when a list of tools on session
// failed, or 200 if it did not.
async function status(session) {
  const t = new StreamableHTTPClientTransport(url, { requestInit, sessionId: session });
  await t.start();
  try {
    await new Promise((resolve, reject) => {
      t.onmessage = resolve;
      t.onerror = reject;
      t.send({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }).catch(reject);
    });
    return 200;
  } catch (e) {
    return e.code ?? String(e);
  } finally {
    await t.close();
  }
}

const transport = new StreamableHTTPClientTransport(url, { requestInit });
const client = new Client({ name: "sdk-e2e-sessions", version: "1.0.0" });
await client.connect(transport);
const session = transport.sessionId;
await client.listTools();
out.before = await status(session);
await transport.terminateSession();
await client.close();
out.deleted = await status(session);
out.neverIssued = await status("mcp-session-5e0c4a43-8b5c-4f7e-9a43-3f1f0e0c2a10");
console.log(JSON.stringify(out));
