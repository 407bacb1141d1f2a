// A real MCP client for the e2e tests: the official TypeScript SDK v1 `Client`
// (`@modelcontextprotocol/sdk` 1.x, what most hosts ship) over its stdio transport.
//
// Input: one JSON object on stdin:
//   {"command": "...", "args": [...], "timeoutMs": 60000,
//    "steps": [{"op": "list"}, {"op": "call", "name": "...", "arguments": {...}}, ...]}
// Output (stdout), one JSON object per line:
//   {"kind":"connected","protocolVersion":...}
//   {"kind":"list","tools":[names],"descriptions":{name: description}}
//     or {"kind":"list","thrown":"<message>"}
//   {"op":"read","uri":"..."} -> {"kind":"read","uri":...,"texts":[...]}
//   {"op":"prompt","name":"...","arguments":{...}} -> {"kind":"prompt","name":...,"texts":[...]}
//     (read and prompt: or {"kind":...,"thrown":"<message>","code":<JSON-RPC code>,"data":...}
//     when the request got a JSON-RPC error)
//   {"kind":"call","name":...,"is_error":bool,"structuredContent":...,"texts":[...]}
//     or {"kind":"call","name":...,"thrown":"<message>"} when the SDK refused the reply
//   {"kind":"closed","errors":[...]}  (what the client reported through onerror, e.g. a
//     response for an unknown message id)
// A connect failure exits 1 with the error on stderr.
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { readOrPrompt } from './ts_v1_ops.mjs';

const spec = JSON.parse(readFileSync(0, 'utf8'));
const timeout = spec.timeoutMs ?? 60000;
const out = obj => process.stdout.write(JSON.stringify(obj) + '\n');

const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined));
const transport = new StdioClientTransport({ command: spec.command, args: spec.args ?? [], env, stderr: 'inherit' });
const client = new Client({ name: 'assay-e2e-ts-v1-client', version: '1.0.0' });
const errors = [];
client.onerror = err => errors.push(String(err?.message ?? err));

try {
    await client.connect(transport, { timeout });
} catch (err) {
    process.stderr.write(`ts_v1_client: ${err?.stack ?? err}\n`);
    process.exit(1);
}
out({ kind: 'connected', protocolVersion: transport.protocolVersion ?? null });
for (const step of spec.steps ?? []) {
    if (step.op === 'list') {
        try {
            const r = await client.listTools(undefined, { timeout });
            out({
                kind: 'list', tools: r.tools.map(t => t.name),
                descriptions: Object.fromEntries(r.tools.map(t => [t.name, t.description ?? null])),
            });
        } catch (err) {
            out({ kind: 'list', thrown: String(err?.message ?? err) });
        }
        continue;
    }
    if (step.op === 'read' || step.op === 'prompt') {
        out(await readOrPrompt(client, step, timeout));
        continue;
    }
    try {
        const r = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, { timeout });
        out({
            kind: 'call',
            name: step.name,
            is_error: r.isError === true,
            structuredContent: r.structuredContent ?? null,
            texts: (r.content ?? []).filter(c => c.type === 'text').map(c => c.text),
        });
    } catch (err) {
        out({ kind: 'call', name: step.name, thrown: String(err?.message ?? err) });
    }
}
await client.close();
out({ kind: 'closed', errors });
process.exit(0);
