"""A hostile client against a real `assay mcp serve` (docs/serve.md, "How a request flows"): a
body the guard would refuse after the front took it (nesting, numbers) is refused at the front
instead of left unanswered; repeated JSON members are judged and executed as the same call; a
cancellation naming no request id is taken without a 500; a body under a `limits.max_body` raised
past the links' 16 MiB frames is answered. No traceback on stderr."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import trio

from tests.serve.gwsupport import local_serve_config
from tests.serve.httpsupport import open_session

ASSAY = str(Path(sys.executable).parent / "assay")


def _call(msg_id: int, params: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}' % (msg_id, params)


async def test_hostile_bodies_against_a_real_serve(tmp_path: Path) -> None:
    config = local_serve_config(tmp_path, "logs: {audit: audit.ndjson}\nlimits: {max_body: 20MiB}")
    proc = subprocess.Popen(
        [ASSAY, "mcp", "serve", "--config", str(config)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    assert proc.stderr is not None
    try:
        with trio.fail_after(60):
            line = await trio.to_thread.run_sync(proc.stderr.readline)
            assert line.startswith(b"assay: serving http://127.0.0.1:"), line
            url = line.split()[2].decode()
            async with httpx2.AsyncClient(timeout=15) as http:
                headers = await open_session(http, url, version="2025-11-25")

                async def post(body: bytes) -> tuple[int, dict[str, Any]]:
                    response = await http.post(url, content=body, headers=headers)
                    return response.status_code, response.json() if response.content else {}

                def text(answer: dict[str, Any]) -> str:
                    return str(answer["result"]["content"][0]["text"])

                # 128 levels in all: the guard admits it and the upstream answers
                deep = b'{"name":"local__send","arguments":{"text":"x","deep":%s}}'
                status, answer = await post(_call(2, deep % (b"[" * 125 + b"]" * 125)))
                assert (status, text(answer)) == (200, "sent x")
                # one level more, or an integer beyond a double: refused here, not left waiting
                for body in (
                    _call(3, deep % (b"[" * 126 + b"]" * 126)),
                    _call(4, deep % (b'{"a":' * 126 + b"1" + b"}" * 126)),
                    _call(5, deep % (b"9" * 400)),
                ):
                    status, answer = await post(body)
                    assert (status, answer["error"]["code"]) == (400, -32700), body[:80]
                # a member given twice: the last is the one judged and the one run
                status, answer = await post(
                    _call(6, b'{"name":"local__delete_all","name":"local__send","arguments":{"text":"dup"}}')
                )
                assert (status, text(answer)) == (200, "sent dup")
                status, answer = await post(
                    _call(7, b'{"name":"local__send","name":"local__delete_all","arguments":{"text":"dup"}}')
                )
                assert status == 200 and answer["result"]["isError"] is True
                # a cancellation naming an object, a list or a boolean: no request of the session
                for request_id in (b'{"a":1}', b"[1]", b"true", b"1.0"):
                    cancel = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s}}'
                    assert await post(cancel % request_id) == (202, {})
                status, answer = await post(_call(8, b'{"name":"local__send","arguments":{"text":"alive"}}'))
                assert (status, text(answer)) == (200, "sent alive")
                # limits.max_body over the links' 16 MiB frames: a body under it is one frame
                big = b'{"name":"local__send","arguments":{"text":"big","pad":"%s"}}' % (b"a" * (17 << 20))
                status, answer = await post(_call(9, big))
                assert (status, text(answer)) == (200, "sent big")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        await trio.to_thread.run_sync(proc.wait, 30)
    err = proc.stderr.read().decode()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Error in ASGI" not in err, err
    records = [json.loads(r) for r in (tmp_path / "audit.ndjson").read_text().splitlines()]
    assert [(r["tool"], r["decision"]) for r in records] == [
        ("send", "allow"),
        ("send", "allow"),
        ("delete_all", "deny"),
        ("send", "allow"),
        ("send", "allow"),
    ]
