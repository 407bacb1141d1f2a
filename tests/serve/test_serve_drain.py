"""SIGTERM with calls in flight, as a real `assay mcp serve` process (docs/serve.md,
"Stopping"): the listeners close, the calls in flight are answered (with their results when the
upstream answers within ``limits.drain_timeout``, else cancelled with an error at the deadline),
the process exits 0 and no upstream process is left. Real MCP SDK clients, a stdio upstream whose
``wait`` tool holds each call until the test releases it (tests/serve/gw_stdio_server.py); every
wait is on an event (a line on the gateway's stderr, a FIFO), never a sleep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation

from gwsupport import STDIO_SERVER

ASSAY = str(Path(sys.executable).parent / "assay")
POLICY = 'version: "2.0"\ntools:\n  allow: ["*"]\nenforcement: { unconstrained_tools: allow }\n'


class Lines:
    """The gateway's stderr, a line at a time, read in a thread (the upstream writes there too)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.seen: list[str] = []

    async def until(self, predicate: Any) -> str:
        assert self.proc.stderr is not None
        while True:
            raw = await trio.to_thread.run_sync(self.proc.stderr.readline)
            assert raw, f"the gateway's stderr ended; it said: {self.seen}"
            line = raw.decode(errors="replace").rstrip("\n")
            self.seen.append(line)
            if predicate(line):
                return line


async def _release(fifo: Path) -> None:
    def write() -> None:
        fd = os.open(fifo, os.O_WRONLY)  # the upstream holds it open for reading
        try:
            os.write(fd, b"go\n")
        finally:
            os.close(fd)

    await trio.to_thread.run_sync(write)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sigterm_answers_every_call_in_flight_then_exits_0_with_no_upstream_left(
    tmp_path: Path, mode: str
) -> None:
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    (tmp_path / "policy.yaml").write_text(POLICY)
    (tmp_path / "serve.yaml").write_text(
        f"""\
policy: policy.yaml
listen: 127.0.0.1:0
state_dir: {tmp_path / "state"}
identity: {{none: true}}
limits: {{drain_timeout: 3s}}
logs: {{audit: audit.ndjson}}
upstreams:
  local:
    command: [{json.dumps(sys.executable)}, {json.dumps(str(STDIO_SERVER))}]
    env: {{GW_RELEASE: {json.dumps(str(fifo))}}}
"""
    )
    proc = subprocess.Popen(
        [ASSAY, "mcp", "serve", "--config", str(tmp_path / "serve.yaml")],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    lines = Lines(proc)
    results: dict[str, Any] = {}
    ends: list[str] = []  # how a client's session ended, should it end in an error (shown on a failure)
    pids: set[int] = set()
    released = {f"c{n}-{k}" for n in range(3) for k in range(2)}
    held = {"c0-hold", "c2-hold"}
    try:
        with trio.fail_after(120):
            ready = await lines.until(lambda line: line.startswith("assay: serving "))
            url = ready.split()[2]

            async def one_client(n: int) -> None:
                http = httpx2.AsyncClient(timeout=60)
                info = Implementation(name=f"drain-client-{n}", version="9.1")
                try:
                    async with Client(streamable_http_client(url, http_client=http), mode=mode, client_info=info) as c:
                        # listed first: the SDK lists the tools after a call to a tool it has not
                        # seen (to check its output schema), a request a draining gateway refuses
                        await c.list_tools()
                        async with trio.open_nursery() as calls:
                            tags = [f"c{n}-0", f"c{n}-1"] + ([f"c{n}-hold"] if f"c{n}-hold" in held else [])
                            for tag in tags:

                                async def call(tag: str = tag) -> None:
                                    try:
                                        got = await c.call_tool("local__wait", {"tag": tag, "hold": tag in held})
                                        results[tag] = got
                                    except Exception as exc:  # noqa: BLE001 - what the client was answered
                                        results[tag] = exc

                                calls.start_soon(call)
                except Exception as exc:  # noqa: BLE001 - the session's end after the gateway stopped
                    ends.append(repr(exc))

            async with trio.open_nursery() as nursery:
                for n in range(3):
                    nursery.start_soon(one_client, n)
                # every call is at the upstream
                while len(lines_arrived := [x for x in lines.seen if x.startswith("arrived ")]) < 8:
                    await lines.until(lambda line: line.startswith("arrived "))
                pids = {int(x.split()[1]) for x in lines_arrived}
                proc.send_signal(signal.SIGTERM)
                await lines.until(lambda line: line.startswith("assay: draining"))
                await _release(fifo)  # within the drain deadline: these calls get their results
            code = await trio.to_thread.run_sync(proc.wait, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, lines.seen
    assert set(results) == released | held, ends
    for tag in released:
        result = results[tag]
        assert not isinstance(result, Exception) and not result.is_error, (tag, result)
        assert result.content[0].text == f"released {tag}"
    for tag in held:  # not answered by the upstream within the deadline: cancelled, with an error
        result = results[tag]
        assert isinstance(result, MCPError) and "Shutting down" in str(result), (tag, result)
    assert len(pids) == 1  # one user (no authentication), one process of the upstream
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists(), f"upstream {pid} left running"
    # the records carry each call's own client (docs/serve.md, "Records")
    audit = [json.loads(line) for line in (tmp_path / "audit.ndjson").read_text().splitlines()]
    assert sorted((r["client_name"], r["client_version"]) for r in audit) == sorted(
        [(f"drain-client-{n}", "9.1") for n in range(3) for _ in range(2)]
        + [("drain-client-0", "9.1"), ("drain-client-2", "9.1")]
    )
