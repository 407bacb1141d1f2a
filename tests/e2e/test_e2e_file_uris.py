"""End to end: `file:` URIs that a Node server would open outside the allowed directory
(docs/policy.md, "file: URIs" and "Resources and prompts").

The official TypeScript SDK v1 client talks through `assay mcp wrap` to tests/e2e/ts_file_server.mjs,
a real SDK server that opens what a URI names with `url.fileURLToPath(new URL(uri))`, as Node
file servers do, and writes down every file it opens. The URIs are the issue's: a backslash, a
tab or a newline inside `..`, and `%73ecret.txt` under `deny: ["*secret*"]`, as a resource and as a
path argument. The test checks what the client got and what the server opened.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio

from _e2e_support import DENY_TEXT, E2E, RUN_TIMEOUT, WrapRun
from _inspect_support import Leaky, ts_client

FILE_SERVER = E2E / "ts_file_server.mjs"

POLICY = """\
version: "2.0"
tools: { allow: ["*"] }
enforcement: { unconstrained_tools: allow }
path_confinement:
  - { tools: ["*"], args: [path], within: [WS] }
resources:
  allow: ["file://WS/*"]
  deny: ["*secret*"]
"""


def set_up(tmp_path: Path, node: str, base_env: dict[str, str]) -> tuple[Leaky, Path, Path]:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "note.txt").write_text("a note")
    (ws / "secret.txt").write_text("the workspace secret")
    (outside / "data.txt").write_text("outside data")
    home = tmp_path / "run"
    home.mkdir()
    policy = home / "assay.yaml"
    policy.write_text(POLICY.replace("WS", str(ws)))
    opened = home / "opened.ndjson"
    run = WrapRun(home, policy, [node, str(FILE_SERVER)], label="files")
    return Leaky(run, {**base_env, "FILE_SERVER_OPENED": str(opened)}, opened), ws, outside


ESCAPES = ["{ws}/..\\outside\\data.txt", "{ws}/.\t./outside/data.txt", "{ws}/.\n./outside/data.txt"]


async def test_a_node_server_opens_nothing_outside_through_the_issues_uris(node, tmp_path, base_env):
    server, ws, outside = set_up(tmp_path, node, base_env)
    reads = [(f"file://{ws}/note.txt", None)]
    reads += [("file://" + e.format(ws=ws), "E_PATH_CONFINEMENT") for e in ESCAPES]
    reads += [(f"file://{ws}/%73ecret.txt", "E_RESOURCE_DENIED")]
    calls = [(f"file://{ws}/note.txt", None)] + [("file://" + e.format(ws=ws), "E_PATH_CONFINEMENT") for e in ESCAPES]
    steps = [{"op": "read", "uri": uri} for uri, _ in reads]
    steps += [{"op": "call", "name": "read_file", "arguments": {"path": path}} for path, _ in calls]
    with trio.fail_after(RUN_TIMEOUT):
        lines = await ts_client(node, server, steps)
    for (uri, code), line in zip(reads, lines[: len(reads)], strict=True):
        if code is None:
            assert line.get("texts") == ["a note"], line
            continue
        assert line.get("code") == -32003 and line["thrown"].endswith(DENY_TEXT), (uri, line)
        assert line["data"]["error_code"] == code and line["data"]["target"] == uri, line
    for (path, code), line in zip(calls, lines[len(reads) :], strict=True):
        if code is None:
            assert line["texts"] == ["a note"] and not line["is_error"], line
            continue
        assert line["is_error"] and line["structuredContent"]["error_code"] == code, (path, line)
    opened = [json.loads(x) for x in server.calls_file.read_text().splitlines()]
    assert opened == [str(ws / "note.txt")] * 2, opened  # nothing outside, no secret
    denied = [d for d in server.run.decisions() if d["decision"] == "deny"]
    assert len(denied) == len(reads) + len(calls) - 2, denied
    await server.ended()
