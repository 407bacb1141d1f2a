// The TypeScript SDK v1 as an oracle for wrap's response matching: for each server line (on
// stdin, one JSON object {"line": "<text>", "sent": <id>} per line) print whether the SDK's
// stdio client would take it as the answer to request `sent` (a message its schema accepts as a
// response, looked up by Number(id), as Protocol._onresponse does).
import { readFileSync } from 'node:fs';
import { JSONRPCMessageSchema, isJSONRPCResultResponse, isJSONRPCErrorResponse } from '@modelcontextprotocol/sdk/types.js';

for (const raw of readFileSync(0, 'utf8').split('\n')) {
    if (!raw) continue;
    const { line, sent } = JSON.parse(raw);
    let answers = false;
    try {
        const message = JSONRPCMessageSchema.parse(JSON.parse(line));
        if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) {
            answers = Number(message.id) === sent;
        }
    } catch {
        answers = false;
    }
    process.stdout.write(JSON.stringify(answers) + '\n');
}
