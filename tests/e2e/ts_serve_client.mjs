// A real MCP client for the e2e tests of `assay mcp serve` (docs/serve.md): the official
// TypeScript SDK `Client` over its Streamable HTTP transport, v1 (`@modelcontextprotocol/sdk`
// 1.x, what most hosts ship) or v2 (`@modelcontextprotocol/client`; with "mode": "auto" it
// negotiates the 2026-07-28 era).
//
// Input: one JSON object on stdin:
//   {"sdk": "v1" | "v2", "mode": "auto" (v2 only, optional), "url": "...", "token": "...",
//    "answer": "accept" | "decline" (optional: declare elicitation and answer every
//              elicitation/create so; v2 in the 2026-07-28 era meets it as input_required),
//    "sample": "text" (optional: declare sampling and answer every sampling/createMessage with
//              that text; v2 in the 2026-07-28 era meets it as input_required),
//    "steps": [{"op": "list"}, {"op": "call", "name": "...", "arguments": {...}}, ...]}
// Output (stdout), one JSON object per line:
//   {"kind":"connected","protocolVersion":...}
//   {"kind":"list","tools":[names]}
//   {"kind":"call","name":...,"is_error":bool,"texts":[...]} or {"kind":"call","name":...,"thrown":"..."}
// A connect failure exits 1 with the error on stderr.
import { readFileSync } from 'node:fs';

const spec = JSON.parse(readFileSync(0, 'utf8'));
const client_handlers = [];
const out = obj => process.stdout.write(JSON.stringify(obj) + '\n');
const v2 = spec.sdk === 'v2';
const { Client } = await import(v2 ? '@modelcontextprotocol/client' : '@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = await import(
    v2 ? '@modelcontextprotocol/client' : '@modelcontextprotocol/sdk/client/streamableHttp.js'
);
const transport = new StreamableHTTPClientTransport(new URL(spec.url), {
    requestInit: { headers: { Authorization: `Bearer ${spec.token}` } },
});
const capabilities = { ...(spec.answer ? { elicitation: {} } : {}), ...(spec.sample ? { sampling: {} } : {}) };
let sampled = 0;
if (spec.sample) {
    const method = v2 ? 'sampling/createMessage' : (await import('@modelcontextprotocol/sdk/types.js')).CreateMessageRequestSchema;
    client_handlers.push([method, async () => {
        sampled += 1;
        return { role: 'assistant', content: { type: 'text', text: spec.sample }, model: 'e2e' };
    }]);
}
const options = v2 && spec.mode === 'auto' ? { capabilities, versionNegotiation: { mode: 'auto' } } : { capabilities };
const client = new Client({ name: `assay-e2e-ts-${v2 ? 'v2' : 'v1'}-serve-client`, version: '1.0.0' }, options);
for (const [method, handler] of client_handlers) client.setRequestHandler(method, handler);
let asked = 0;
if (spec.answer) {
    // v1 names a request handler by its schema, v2 by its method
    const method = v2 ? 'elicitation/create' : (await import('@modelcontextprotocol/sdk/types.js')).ElicitRequestSchema;
    client.setRequestHandler(method, async () => {
        asked += 1;
        return spec.answer === 'accept' ? { action: 'accept', content: {} } : { action: spec.answer };
    });
}
try {
    await client.connect(transport, { timeout: 60000 });
} catch (err) {
    process.stderr.write(`ts_serve_client: ${err?.stack ?? err}\n`);
    process.exit(1);
}
const version = v2 ? client.getNegotiatedProtocolVersion?.() ?? null : transport.protocolVersion ?? null;
out({ kind: 'connected', protocolVersion: version });
for (const step of spec.steps) {
    if (step.op === 'list') {
        const listed = await client.listTools();
        out({ kind: 'list', tools: listed.tools.map(t => t.name) });
    } else {
        asked = 0;
        sampled = 0;
        try {
            const result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} });
            const texts = (result.content ?? []).filter(c => c.type === 'text').map(c => c.text);
            out({ kind: 'call', name: step.name, is_error: result.isError === true, texts, asked, sampled });
        } catch (err) {
            out({ kind: 'call', name: step.name, thrown: String(err?.message ?? err), asked, sampled });
        }
    }
}
await client.close();
