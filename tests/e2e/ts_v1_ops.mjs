// Steps shared by ts_v1_client.mjs and ts_v1_multi_client.mjs (TypeScript SDK v1 `Client`).

/** A resources/read or prompts/get step, as one output line. */
export async function readOrPrompt(client, step, timeout) {
    const head = step.op === 'read' ? { kind: 'read', uri: step.uri } : { kind: 'prompt', name: step.name };
    try {
        if (step.op === 'read') {
            const r = await client.readResource({ uri: step.uri }, { timeout });
            return { ...head, texts: r.contents.map(c => c.text ?? null) };
        }
        const r = await client.getPrompt({ name: step.name, arguments: step.arguments ?? {} }, { timeout });
        return { ...head, texts: r.messages.map(m => m.content?.text ?? null) };
    } catch (err) {
        return { ...head, thrown: String(err?.message ?? err), code: err?.code ?? null, data: err?.data ?? null };
    }
}

