// A real MCP file server (TypeScript SDK v1 `Server`, stdio) that opens what a file: URI names
// the way Node servers do: `url.fileURLToPath(new URL(uri))`, for tests/e2e/test_e2e_file_uris.py.
// - resources/read {uri}: the file's text;
// - tools/call read_file {path}: a file: URI read the same way, any other value as a path.
// Every file it opens is appended to $FILE_SERVER_OPENED (one JSON line: the path), so a test
// sees what reached the file system, not only what the client got back.
import { appendFileSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import {
    CallToolRequestSchema,
    ListToolsRequestSchema,
    ReadResourceRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

function open(path) {
    appendFileSync(process.env.FILE_SERVER_OPENED, JSON.stringify(path) + '\n');
    return readFileSync(path, 'utf8');
}

function pathOf(value) {
    let url = null;
    try {
        url = new URL(value);
    } catch {
        return value;
    }
    return url.protocol === 'file:' ? fileURLToPath(url) : value;
}

const server = new Server({ name: 'assay-e2e-file-server', version: '1.0.0' },
    { capabilities: { resources: {}, tools: {} } });
server.setRequestHandler(ReadResourceRequestSchema, async ({ params }) => ({
    contents: [{ uri: params.uri, mimeType: 'text/plain', text: open(pathOf(params.uri)) }],
}));
server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{
        name: 'read_file',
        description: 'Read a file by path or file: URI.',
        inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    }],
}));
server.setRequestHandler(CallToolRequestSchema, async ({ params }) => {
    try {
        return { content: [{ type: 'text', text: open(pathOf(params.arguments.path)) }] };
    } catch (err) {
        return { content: [{ type: 'text', text: String(err?.message ?? err) }], isError: true };
    }
});
await server.connect(new StdioServerTransport());
