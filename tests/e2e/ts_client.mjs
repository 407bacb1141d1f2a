// A real MCP client for the e2e tests: the official TypeScript SDK v2 `Client` over its stdio
// transport, in `versionNegotiation: {mode: 'auto'}` (it probes a disposable sibling process
// with `server/discover`, kills it, then opens the real session).
//
// Input: one JSON object, as argv[2] or on stdin:
//   {"command": "...", "args": [...], "calls": [{"name": "...", "arguments": {...}}, ...],
//    "timeoutMs": 60000}
// Output (stdout), one JSON object per line:
//   {"kind":"connected","era":...,"protocolVersion":...,"tools":[names]}
//   {"kind":"call","name":...,"is_error":bool,"structuredContent":...,"text":...}
//     or {"kind":"call","name":...,"thrown":"<error message>"} when the SDK refused the reply
//   {"kind":"closed"}
// Anything unexpected (connect or list failure) exits 1 with the error on stderr.
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const spec = JSON.parse(process.argv[2] ?? readFileSync(0, 'utf8'));
const timeout = spec.timeoutMs ?? 60000;
const t0 = Date.now();
const out = obj => process.stdout.write(JSON.stringify({ ...obj, ms: Date.now() - t0 }) + '\n');

// The transport passes only a few "safe" variables to the child unless told otherwise; wrap
// needs PATH (the venv) and the test's environment.
const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined));
const transport = new StdioClientTransport({ command: spec.command, args: spec.args ?? [], env, stderr: 'inherit' });
const client = new Client({ name: 'assay-e2e-ts-client', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });

try {
    await client.connect(transport, { timeout });
    const tools = await client.listTools(undefined, { timeout });
    out({
        kind: 'connected',
        era: client.getProtocolEra() ?? null,
        protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
        tools: tools.tools.map(t => t.name),
    });
    for (const call of spec.calls ?? []) {
        try {
            const r = await client.callTool({ name: call.name, arguments: call.arguments ?? {} }, { timeout });
            out({
                kind: 'call',
                name: call.name,
                is_error: r.isError === true,
                structuredContent: r.structuredContent ?? null,
                text: (r.content ?? []).filter(c => c.type === 'text').map(c => c.text).join(''),
            });
        } catch (err) {
            out({ kind: 'call', name: call.name, thrown: String(err?.message ?? err) });
        }
    }
    await client.close();
    out({ kind: 'closed' });
    process.exit(0);
} catch (err) {
    process.stderr.write(`ts_client: ${err?.stack ?? err}\n`);
    process.exit(1);
}
