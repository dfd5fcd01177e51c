// The official TypeScript MCP SDK's client over Streamable HTTP: an independent
// implementation of the protocol. Reads one JSON job on stdin:
//   {"url": "...", "token": "..." | null, "calls": [{"name": "...", "arguments": {...}}]}
// and writes one JSON document on stdout: the listed tools and each call's result
// (or the error the client raised for it).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const job = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const headers = job.token ? { Authorization: `Bearer ${job.token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(job.url), {
  requestInit: { headers },
});
const client = new Client({ name: "toolloop-tests", version: "1.0.0" });
const report = { protocolVersion: null, tools: null, calls: [] };
try {
  await client.connect(transport);
  report.protocolVersion = transport.protocolVersion ?? null;
  report.tools = (await client.listTools()).tools;
  for (const call of job.calls) {
    try {
      report.calls.push({ result: await client.callTool(call) });
    } catch (error) {
      report.calls.push({ error: { code: error.code ?? null, message: String(error.message) } });
    }
  }
} catch (error) {
  report.connectError = { code: error.code ?? null, message: String(error.message) };
} finally {
  await client.close();
}
process.stdout.write(JSON.stringify(report));
