// A tiny modern MCP server (stdio) on the official TypeScript SDK v2 `serveStdio`, for D16a:
// clients in auto mode negotiate the 2026-07-28 era with it, so wrap's deny replies must be
// valid modern results. It offers the same tool names as examples/demo_server.py.
import { McpServer, fromJsonSchema } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

const FILES = { '/workspace/README.md': '# Demo workspace\n' };

const pathArg = fromJsonSchema({
    type: 'object',
    properties: { path: { type: 'string' } },
    required: ['path'],
});

function text(t) {
    return { content: [{ type: 'text', text: t }] };
}

serveStdio(() => {
    const server = new McpServer({ name: 'assay-e2e-modern-ts', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.registerTool('read_file', { description: 'Read a file.', inputSchema: pathArg }, async ({ path }) =>
        path in FILES ? text(FILES[path]) : { ...text(`no such file: ${path}`), isError: true },
    );
    server.registerTool('list_dir', { description: 'List files.', inputSchema: pathArg }, async ({ path }) =>
        text(Object.keys(FILES).filter(f => f.startsWith(path.replace(/\/$/, '') + '/')).join('\n')),
    );
    server.registerTool(
        'exec',
        { description: 'Pretend to run a command.', inputSchema: fromJsonSchema({ type: 'object', properties: { command: { type: 'string' } } }) },
        async ({ command }) => text(`pretended to run: ${command}`),
    );
    return server;
});
