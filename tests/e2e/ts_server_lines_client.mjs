// A real MCP client that shows everything its SDK hands to its host, for the malformed-answer
// and server-message tests (tests/e2e/test_e2e_malformed.py): the official TypeScript SDK
// `Client` over stdio, v1 (`@modelcontextprotocol/sdk`) or v2 (`@modelcontextprotocol/client`,
// its default `initialize` handshake), declaring sampling and elicitation, with a handler for
// the server's `sampling/createMessage` and `elicitation/create`, a handler for its log
// messages, and a progress callback on each call.
//
// Input: one JSON object on stdin:
//   {"sdk": "v1" | "v2", "mode": "auto" (v2 only, optional), "command": "...", "args": [...],
//    "timeoutMs": 20000, "calls": ["<tool>", ...]}
// Output (stdout), one JSON object per line:
//   {"kind":"connected"}
//   {"kind":"call","name":...,"result":<the result as the SDK returned it>,"seen":{...}}
//     or {"kind":"call","name":...,"thrown":"<message>","code":...,"data":...,"seen":{...}}
//     where seen = {"sampled": [params], "elicited": [params], "logs": [params], "progress": [...]}
//     is what the handlers were given during the call
//   {"kind":"closed","errors":[...]}   (what the client reported through onerror)
import { readFileSync } from 'node:fs';

const spec = JSON.parse(readFileSync(0, 'utf8'));
const timeout = spec.timeoutMs ?? 20000;
const out = obj => process.stdout.write(JSON.stringify(obj) + '\n');

const v2 = spec.sdk === 'v2';
const { Client } = await import(v2 ? '@modelcontextprotocol/client' : '@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import(v2 ? '@modelcontextprotocol/client/stdio' : '@modelcontextprotocol/sdk/client/stdio.js');
const types = v2 ? null : await import('@modelcontextprotocol/sdk/types.js');
// v1 names a handler by its schema, v2 by its method
const sampleMethod = v2 ? 'sampling/createMessage' : types.CreateMessageRequestSchema;
const elicitMethod = v2 ? 'elicitation/create' : types.ElicitRequestSchema;
const logMethod = v2 ? 'notifications/message' : types.LoggingMessageNotificationSchema;

const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined));
const transport = new StdioClientTransport({ command: spec.command, args: spec.args ?? [], env, stderr: 'inherit' });
const capabilities = { sampling: {}, elicitation: {} };
const options = v2 && spec.mode === 'auto' ? { capabilities, versionNegotiation: { mode: 'auto' } } : { capabilities };
const client = new Client({ name: `assay-e2e-ts-${v2 ? 'v2' : 'v1'}-lines-client`, version: '1.0.0' }, options);
const errors = [];
client.onerror = err => errors.push(String(err?.message ?? err));
let seen = null;
const fresh = () => ({ sampled: [], elicited: [], logs: [], progress: [] });
client.setRequestHandler(sampleMethod, async request => {
    seen.sampled.push(request.params);
    return { role: 'assistant', content: { type: 'text', text: 'ok' }, model: 'e2e', stopReason: 'endTurn' };
});
client.setRequestHandler(elicitMethod, async request => {
    seen.elicited.push(request.params);
    return { action: 'decline' };
});
client.setNotificationHandler(logMethod, async notification => { seen.logs.push(notification.params); });

try {
    await client.connect(transport, { timeout });
} catch (err) {
    process.stderr.write(`ts_server_lines_client: ${err?.stack ?? err}\n`);
    process.exit(1);
}
out({ kind: 'connected' });
for (const name of spec.calls ?? []) {
    seen = fresh();
    const options = { timeout, onprogress: p => seen.progress.push(p) };
    try {
        const args = { name, arguments: {} };
        const r = v2 ? await client.callTool(args, options) : await client.callTool(args, undefined, options);
        out({ kind: 'call', name, result: r, seen });
    } catch (err) {
        out({ kind: 'call', name, thrown: String(err?.message ?? err), code: err?.code ?? null, data: err?.data ?? null, seen });
    }
}
await client.close();
out({ kind: 'closed', errors });
process.exit(0);
