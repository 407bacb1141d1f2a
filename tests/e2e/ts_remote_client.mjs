// A real MCP client for the e2e tests of `assay mcp wrap --url` (docs/remote.md): the official
// TypeScript SDK `Client` over its stdio transport, v1 (`@modelcontextprotocol/sdk` 1.x, what
// most hosts ship) or v2 (`@modelcontextprotocol/client`; with `"mode": "auto"` it negotiates
// the 2026-07-28 era with a modern server), driving wrap, which talks HTTP to the server.
//
// Input: one JSON object on stdin:
//   {"sdk": "v1" | "v2", "mode": "auto" (v2 only, optional), "command": "...", "args": [...],
//    "timeoutMs": 60000, "answer": {"action": "accept", "content": {...}} | null
//      (the answer to every elicitation/create; null: no elicitation capability),
//    "steps": [{"op": "list"}, {"op": "call", "name": "...", "arguments": {...}}, ...]}
// Output (stdout), one JSON object per line:
//   {"kind":"connected","protocolVersion":...}
//   {"kind":"list","tools":[names]} or {"kind":"list","thrown":"<message>","code":...}
//   {"kind":"call","name":...,"is_error":bool,"structuredContent":...,"texts":[...],
//    "progress":[{"progress":...,"total":...,"message":...}] (what the SDK handed to onprogress),
//    "wire":[progress, ...] (the progress notifications wrap sent during the call),
//    "asked":[message, ...]}
//     or {"kind":"call","name":...,"thrown":"<message>","code":<JSON-RPC code or null>,...}
//   {"kind":"closed","errors":[...]}
// A connect failure exits 1 with the error on stderr.
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
const client = new Client({ name: `assay-e2e-ts-${v2 ? 'v2' : 'v1'}-remote-client`, version: '1.0.0' }, options);
const errors = [];
client.onerror = err => errors.push(String(err?.message ?? err));
let asked = [];
if (spec.answer != null) {
    client.setRequestHandler(elicitMethod, async request => {
        asked.push(request.params.message);
        return spec.answer;
    });
}

try {
    await client.connect(transport, { timeout });
} catch (err) {
    process.stderr.write(`ts_remote_client: ${err?.stack ?? err}\n`);
    process.exit(1);
}
const version = v2 ? client.getNegotiatedProtocolVersion?.() ?? null : transport.protocolVersion ?? null;
out({ kind: 'connected', protocolVersion: version });
// The progress notifications as they come off the wire, before the SDK handles them: the v1
// `Protocol` runs notification handlers a microtask later but a response at once, so progress
// read in the same chunk as its call's answer finds its handler gone (reported through onerror
// as "a progress notification for an unknown token"); the wire shows what wrap relayed.
let wire = [];
const onmessage = transport.onmessage;
transport.onmessage = (message, extra) => {
    if (message?.method === 'notifications/progress') wire.push(message.params?.progress ?? null);
    onmessage?.(message, extra);
};
const thrown = err => ({ thrown: String(err?.message ?? err), code: typeof err?.code === 'number' ? err.code : null });
for (const step of spec.steps ?? []) {
    if (step.op === 'list') {
        try {
            const r = await client.listTools(undefined, { timeout });
            out({ kind: 'list', tools: r.tools.map(t => t.name) });
        } catch (err) {
            out({ kind: 'list', ...thrown(err) });
        }
        continue;
    }
    asked = [];
    wire = [];
    const progress = [];
    const opts = { timeout, onprogress: p => progress.push({ progress: p.progress, total: p.total ?? null, message: p.message ?? null }) };
    try {
        const args = { name: step.name, arguments: step.arguments ?? {} };
        const r = v2 ? await client.callTool(args, opts) : await client.callTool(args, undefined, opts);
        out({
            kind: 'call',
            name: step.name,
            is_error: r.isError === true,
            structuredContent: r.structuredContent ?? null,
            texts: (r.content ?? []).filter(c => c.type === 'text').map(c => c.text),
            progress,
            wire,
            asked,
        });
    } catch (err) {
        out({ kind: 'call', name: step.name, ...thrown(err), progress, wire, asked });
    }
}
await client.close();
out({ kind: 'closed', errors });
process.exit(0);
