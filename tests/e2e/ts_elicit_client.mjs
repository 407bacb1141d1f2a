// A real MCP client that can ask a person, for the approval e2e tests: the official TypeScript
// SDK `Client` over stdio, v1 (`@modelcontextprotocol/sdk` 1.x, what most hosts ship) or v2
// (`@modelcontextprotocol/client`, in its default `initialize` handshake, or with `"mode":"auto"`
// in `versionNegotiation: {mode: 'auto'}`, which negotiates 2026-07-28 with a modern server and
// then meets wrap's approval as an `input_required` result), declaring the `elicitation`
// capability and answering `elicitation/create` with a request handler.
//
// Input: one JSON object on stdin:
//   {"sdk": "v1" | "v2", "mode": "auto" (v2 only, optional), "command": "...", "args": [...], "timeoutMs": 60000,
//    "answer": "accept" | "decline" | "cancel" | null   (null: no elicitation capability at all),
//    "calls": [{"name": "...", "arguments": {...}}, ...]}
// Output (stdout), one JSON object per line:
//   {"kind":"connected","protocolVersion":...}
//   {"kind":"call","name":...,"is_error":bool,"structuredContent":...,"texts":[...],
//    "asked":[{"message":...,"mode":...,"requestedSchema":...}]}   (what the handler was asked
//    during this call) or {"kind":"call","name":...,"thrown":"<message>","asked":[...]}
//   {"kind":"closed","errors":[...]}
import { readFileSync } from 'node:fs';

const spec = JSON.parse(readFileSync(0, 'utf8'));
const timeout = spec.timeoutMs ?? 60000;
const out = obj => process.stdout.write(JSON.stringify(obj) + '\n');

const v2 = spec.sdk === 'v2';
const { Client } = await import(v2 ? '@modelcontextprotocol/client' : '@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import(v2 ? '@modelcontextprotocol/client/stdio' : '@modelcontextprotocol/sdk/client/stdio.js');
// v1 names a request handler by its schema, v2 by its method
const elicitMethod = v2 ? 'elicitation/create' : (await import('@modelcontextprotocol/sdk/types.js')).ElicitRequestSchema;

const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined));
const transport = new StdioClientTransport({ command: spec.command, args: spec.args ?? [], env, stderr: 'inherit' });
const capabilities = spec.answer == null ? {} : { elicitation: {} };
const options = v2 && spec.mode === 'auto' ? { capabilities, versionNegotiation: { mode: 'auto' } } : { capabilities };
const client = new Client({ name: `assay-e2e-ts-${v2 ? 'v2' : 'v1'}-elicit-client`, version: '1.0.0' }, options);
const errors = [];
client.onerror = err => errors.push(String(err?.message ?? err));
let asked = [];
if (spec.answer != null) {
    client.setRequestHandler(elicitMethod, async request => {
        const p = request.params;
        asked.push({ message: p.message, mode: p.mode ?? null, requestedSchema: p.requestedSchema ?? null });
        return spec.answer === 'accept' ? { action: 'accept', content: {} } : { action: spec.answer };
    });
}

try {
    await client.connect(transport, { timeout });
} catch (err) {
    process.stderr.write(`ts_elicit_client: ${err?.stack ?? err}\n`);
    process.exit(1);
}
out({ kind: 'connected', protocolVersion: v2 ? client.getNegotiatedProtocolVersion() ?? null : null });
for (const call of spec.calls ?? []) {
    asked = [];
    try {
        const args = { name: call.name, arguments: call.arguments ?? {} };
        const r = v2 ? await client.callTool(args, { timeout }) : await client.callTool(args, undefined, { timeout });
        out({
            kind: 'call',
            name: call.name,
            is_error: r.isError === true,
            structuredContent: r.structuredContent ?? null,
            texts: (r.content ?? []).filter(c => c.type === 'text').map(c => c.text),
            asked,
        });
    } catch (err) {
        out({ kind: 'call', name: call.name, thrown: String(err?.message ?? err), asked });
    }
}
await client.close();
out({ kind: 'closed', errors });
process.exit(0);
