// The TypeScript SDKs as an oracle of what a client takes from a line: for each line on stdin
// (one JSON string per line: the line's text), print {"v1": bool, "v2": bool}: whether the
// SDK v1 (`@modelcontextprotocol/sdk`) and v2 (`@modelcontextprotocol/core`, what
// `@modelcontextprotocol/client` reads with) accept it as a JSON-RPC message (their stdio
// transports parse each line with JSON.parse and this schema; a refused line reaches the host
// only as an error without its content).
import { readFileSync } from 'node:fs';
import { JSONRPCMessageSchema as V1 } from '@modelcontextprotocol/sdk/types.js';
import { JSONRPCMessageSchema as V2 } from '@modelcontextprotocol/core/internal';

for (const raw of readFileSync(0, 'utf8').split('\n')) {
    if (!raw) continue;
    const line = JSON.parse(raw);
    let value;
    try {
        value = JSON.parse(line);
    } catch {
        process.stdout.write(JSON.stringify({ v1: false, v2: false }) + '\n');
        continue;
    }
    process.stdout.write(JSON.stringify({ v1: V1.safeParse(value).success, v2: V2.safeParse(value).success }) + '\n');
}
