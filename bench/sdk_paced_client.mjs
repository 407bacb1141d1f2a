// The latency of tools/call through the official TypeScript SDK's client, v1
// (`@modelcontextprotocol/sdk` 1.x, what most hosts ship), for bench/bench_serve.py's `sdk`
// figure: one Client, 20 calls not counted, then `n` calls at 100 calls/s, each timed from
// `callTool` to its result.
//
// Input: one JSON object as the first argument:
//   {"command": [argv...]}                    the server over stdio (StdioClientTransport), or
//   {"url": "http://...", "token": "..."}      the server over Streamable HTTP,
//   plus "tool": "...", "n": 500.
// Output (stdout): one JSON array of the counted calls' latencies, in milliseconds.
// A call that fails, or answers isError, exits 1 with the reason on stderr.
const spec = JSON.parse(process.argv[2]);
const sdk = new URL('../tests/e2e/node_modules/@modelcontextprotocol/sdk/dist/esm/client/', import.meta.url);
const { Client } = await import(new URL('index.js', sdk));
let transport;
if (spec.command) {
    const { StdioClientTransport } = await import(new URL('stdio.js', sdk));
    transport = new StdioClientTransport({ command: spec.command[0], args: spec.command.slice(1), stderr: 'inherit' });
} else {
    const { StreamableHTTPClientTransport } = await import(new URL('streamableHttp.js', sdk));
    transport = new StreamableHTTPClientTransport(new URL(spec.url), {
        requestInit: { headers: { Authorization: `Bearer ${spec.token}` } },
    });
}
const client = new Client({ name: 'assay-bench-sdk-paced', version: '1.0.0' });
await client.connect(transport);
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const out = [];
for (let i = 0; i < 20 + spec.n; i++) {
    const t0 = process.hrtime.bigint();
    const result = await client.callTool({ name: spec.tool, arguments: { query: `q${i}`, limit: 10 } });
    const took = Number(process.hrtime.bigint() - t0) / 1e6;
    if (result.isError) {
        process.stderr.write(`sdk_paced_client: ${JSON.stringify(result).slice(0, 300)}\n`);
        process.exit(1);
    }
    if (i >= 20) out.push(took);
    await sleep(Math.max(0, 10 - took));
}
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
