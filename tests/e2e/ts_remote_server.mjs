// A real MCP server over Streamable HTTP on the official TypeScript SDK v1
// (`@modelcontextprotocol/sdk`: McpServer + StreamableHTTPServerTransport on node:http), for
// bench/bench_remote.py and the e2e tests of `assay mcp wrap --url` (docs/remote.md).
//
//   node ts_remote_server.mjs [--stateless] [--json]
//
// Stateful by default (one transport per session, `Mcp-Session-Id`), event-stream answers unless
// --json. One tool, `echo` ({text} -> text). It binds 127.0.0.1 on a free port, listens, and
// only then prints `PORT <n>` on stdout (the endpoint is /mcp).
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const stateless = process.argv.includes('--stateless');
const json = process.argv.includes('--json');

function mcpServer() {
    const server = new McpServer({ name: 'bench-echo-ts', version: '1.0.0' });
    server.registerTool('echo', { description: 'Return the text.', inputSchema: { text: z.string() } },
        async ({ text }) => ({ content: [{ type: 'text', text }] }));
    return server;
}

const sessions = new Map();

async function readBody(req) {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const text = Buffer.concat(chunks).toString('utf8');
    return text ? JSON.parse(text) : undefined;
}

async function handle(req, res) {
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    if (stateless) {
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: json });
        const server = mcpServer();
        res.on('close', () => { transport.close(); server.close(); });
        await server.connect(transport);
        await transport.handleRequest(req, res, body);
        return;
    }
    const id = req.headers['mcp-session-id'];
    let transport = id ? sessions.get(id) : undefined;
    if (!transport && req.method === 'POST' && isInitializeRequest(body)) {
        transport = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            enableJsonResponse: json,
            onsessioninitialized: sid => sessions.set(sid, transport),
        });
        transport.onclose = () => { if (transport.sessionId) sessions.delete(transport.sessionId); };
        await mcpServer().connect(transport);
    }
    if (!transport) {
        res.writeHead(id ? 404 : 400, { 'content-type': 'text/plain' }).end(id ? 'no such session' : 'no session');
        return;
    }
    await transport.handleRequest(req, res, body);
}

const http = createServer((req, res) => {
    handle(req, res).catch(err => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(String(err));
    });
});
http.listen(0, '127.0.0.1', () => {
    process.stdout.write(`PORT ${http.address().port}\n`);
});
