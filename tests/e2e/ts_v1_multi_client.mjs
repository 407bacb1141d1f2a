// One host process with several MCP servers, as a desktop client runs them: the official
// TypeScript SDK v1 `Client` (`@modelcontextprotocol/sdk` 1.x), one Client and one stdio
// transport per server, all in this one process (so every wrap it starts has this process as
// its client: docs/wrap.md, "Shared sessions").
//
// Input: one JSON object on stdin:
//   {"servers": {"<name>": {"command": "...", "args": [...], "env": {...}}, ...},
//    "timeoutMs": 60000,
//    "steps": [{"server": "<name>", "name": "<tool>", "arguments": {...}}, ...]}
// Output (stdout), one JSON object per line:
//   {"kind":"connected","server":...}
//   {"kind":"call","server":...,"name":...,"is_error":bool,"structuredContent":...,"texts":[...]}
//     or {"kind":"call",...,"thrown":"<message>"}
//   a step with "op": "read" ({"server", "op", "uri"}) or "prompt" ({"server", "op", "name",
//   "arguments"}): {"kind":"read"|"prompt","server":...,...} as ts_v1_client.mjs writes it
//   {"kind":"closed","errors":[...]}
// A connect failure exits 1 with the error on stderr.
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { readOrPrompt } from './ts_v1_ops.mjs';

const spec = JSON.parse(readFileSync(0, 'utf8'));
const timeout = spec.timeoutMs ?? 60000;
const out = obj => process.stdout.write(JSON.stringify(obj) + '\n');
const base = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined));
const errors = [];
const clients = {};

for (const [name, server] of Object.entries(spec.servers)) {
    const transport = new StdioClientTransport({
        command: server.command, args: server.args ?? [], env: { ...base, ...(server.env ?? {}) }, stderr: 'inherit',
    });
    const client = new Client({ name: 'assay-e2e-ts-v1-host', version: '1.0.0' });
    client.onerror = err => errors.push(`${name}: ${String(err?.message ?? err)}`);
    try {
        await client.connect(transport, { timeout });
    } catch (err) {
        process.stderr.write(`ts_v1_multi_client: ${name}: ${err?.stack ?? err}\n`);
        process.exit(1);
    }
    clients[name] = client;
    out({ kind: 'connected', server: name });
}
for (const step of spec.steps ?? []) {
    const client = clients[step.server];
    if (step.op === 'read' || step.op === 'prompt') {
        out({ ...(await readOrPrompt(client, step, timeout)), server: step.server });
        continue;
    }
    try {
        const r = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, { timeout });
        out({
            kind: 'call', server: step.server, name: step.name, is_error: r.isError === true,
            structuredContent: r.structuredContent ?? null,
            texts: (r.content ?? []).filter(c => c.type === 'text').map(c => c.text),
        });
    } catch (err) {
        out({ kind: 'call', server: step.server, name: step.name, thrown: String(err?.message ?? err) });
    }
}
for (const client of Object.values(clients)) await client.close();
out({ kind: 'closed', errors });
