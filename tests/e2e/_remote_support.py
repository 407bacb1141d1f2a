"""Helpers for the end-to-end tests of `assay mcp wrap --url` (docs/remote.md):
real MCP servers over HTTP on 127.0.0.1 (tests/e2e/remote_server.py, and the pinned
@modelcontextprotocol/server-everything in its streamableHttp mode), and real clients (the `mcp`
Python SDK, the TypeScript SDK through tests/e2e/ts_remote_client.mjs, or a raw stdio peer)
talking to wrap over stdio.

Every wait is on an event: a server's `READY <url>` or `RAN <tool>` line on its stdout, a
client's line on wrap's stdout, a pipe's EOF, a pidfd. Never a sleep.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trio

from _e2e_support import E2E, EVERYTHING_SERVER, RUN_TIMEOUT, WrapRun, recorded

REMOTE_SERVER = E2E / "remote_server.py"
REMOTE_PROXY = E2E / "remote_proxy.py"
TS_REMOTE_CLIENT = E2E / "ts_remote_client.mjs"
START_TIMEOUT = 60.0

# The policy for remote_server.py: its tools allowed, `delete_all` denied by name.
REMOTE_POLICY = """\
version: "2.0"
name: e2e-remote
tools:
  allow: ["echo", "add", "slow", "release", "ask", "boom", "stall", "forget", "delete_all", "ask_client", "big",
          "drop", "dropid"]
  deny: ["delete_*"]
enforcement:
  unconstrained_tools: allow
"""

# The policy for server-everything over HTTP: echo allowed, get-env denied by name.
EVERYTHING_POLICY = E2E / "everything_policy.yaml"


def remote_policy(tmp: Path) -> Path:
    path = tmp / "remote.yaml"
    path.write_text(REMOTE_POLICY)
    return path


@dataclass
class RemoteRun(WrapRun):
    """One `assay mcp wrap --url` set-up (no server command: `server` stays empty)."""

    url: str = ""
    transport: str | None = None  # --transport; None: the default (auto)

    @property
    def argv(self) -> list[str]:
        transport = ["--transport", self.transport] if self.transport else []
        return recorded(self.wrap_pids, [*self.wrap_options(), *transport, "--url", self.url])


def remote_run(tmp: Path, url: str, policy: Path | None = None, **kwargs: Any) -> RemoteRun:
    return RemoteRun(tmp, policy or remote_policy(tmp), [], url=url, **kwargs)


# -- servers ---------------------------------------------------------------------------------


@dataclass
class Server:
    """A server process whose output lines are collected as they come (an event per line)."""

    process: trio.Process
    url: str = ""
    lines: list[str] = field(default_factory=list)
    call_log: Path | None = None
    eof: trio.Event = field(default_factory=trio.Event)
    _changed: trio.Event = field(default_factory=trio.Event)

    def _add(self, line: str) -> None:
        self.lines.append(line)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, prefix: str, count: int = 1, timeout: float = RUN_TIMEOUT) -> list[str]:
        """Wait until `count` lines starting with `prefix` came; return them."""
        with trio.fail_after(timeout):
            while True:
                found = [ln for ln in self.lines if ln.startswith(prefix)]
                if len(found) >= count:
                    return found
                if self.eof.is_set():
                    raise AssertionError(f"the server closed its output; lines: {self.lines}")
                await self._changed.wait()

    def ran(self) -> list[str]:
        """The tools the server ran (its call log), in order."""
        if self.call_log is None or not self.call_log.exists():
            return []
        return [json.loads(line)["tool"] for line in self.call_log.read_text().splitlines()]

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


async def _pump(stream: trio.abc.ReceiveStream, server: Server, sink: Path | None) -> None:
    buf = b""
    while True:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        if sink is not None:
            with sink.open("ab") as f:
                f.write(chunk)
        buf += chunk
        *complete, buf = buf.split(b"\n")
        for line in complete:
            server._add(line.decode(errors="replace"))
    if buf:
        server._add(buf.decode(errors="replace"))
    server.eof.set()
    server._add("")  # wakes the waiters


@asynccontextmanager
async def _process(
    argv: list[str], env: dict[str, str], ready: str, tmp: Path, name: str, from_stderr: bool = False
) -> AsyncIterator[Server]:
    """Start `argv`, collect its stdout (or stderr) lines, wait for the line starting with
    `ready`; kill it on exit."""
    log = tmp / f"{name}.out"
    async with trio.open_nursery() as nursery:
        proc = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            env=env,
            stdout=subprocess.DEVNULL if from_stderr else subprocess.PIPE,
            stderr=subprocess.PIPE if from_stderr else None,
        )
        server = Server(proc)
        stream = proc.stderr if from_stderr else proc.stdout
        assert stream is not None
        nursery.start_soon(_pump, stream, server, log)
        try:
            with trio.fail_after(START_TIMEOUT):
                while not any(ln.startswith(ready) for ln in server.lines):
                    if server.eof.is_set():
                        raise AssertionError(f"{name} exited {proc.returncode} before ready: {server.lines}")
                    await server._changed.wait()
            server.url = next(ln for ln in server.lines if ln.startswith(ready))
            yield server
        finally:
            server.kill()
            with trio.move_on_after(30):
                await proc.wait()
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def remote_server(
    tmp: Path,
    env: dict[str, str],
    mode: str = "streamable",
    faults: tuple[str, ...] = (),
    resumable: bool = False,
    nodelay: bool = False,
) -> AsyncIterator[Server]:
    """tests/e2e/remote_server.py on 127.0.0.1 (a free port), ready; `server.url` is its URL."""
    call_log = tmp / f"calls-{mode}{'-nodelay' if nodelay else ''}.ndjson"
    argv = [sys.executable, str(REMOTE_SERVER), "--mode", mode, "--call-log", str(call_log)]
    for fault in faults:
        argv += ["--fault", fault]
    if resumable:
        argv.append("--resumable")
    if nodelay:
        argv.append("--nodelay")
    async with _process(argv, env, "READY ", tmp, f"server-{mode}{'-nodelay' if nodelay else ''}") as server:
        server.url = server.url.split()[1]
        server.call_log = call_log
        yield server


@asynccontextmanager
async def recording_proxy(tmp: Path, env: dict[str, str], upstream: str) -> AsyncIterator[Server]:
    """tests/e2e/remote_proxy.py on 127.0.0.1, forwarding to `upstream` (a URL whose host and
    port are used); `server.url` is the proxy's URL, `server.lines` what reached it."""
    parts = urlsplit(upstream)
    argv = [sys.executable, str(REMOTE_PROXY), "--upstream", f"{parts.hostname}:{parts.port}"]
    async with _process(argv, env, "READY ", tmp, "proxy") as proxy:
        proxy.url = f"http://127.0.0.1:{int(proxy.url.split()[1])}"
        yield proxy


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def everything_server(node: str, tmp: Path, env: dict[str, str]) -> AsyncIterator[Server]:
    """@modelcontextprotocol/server-everything in its streamableHttp mode (its
    dist/transports/streamableHttp.js: the port from $PORT, the endpoint `/mcp`), ready when it
    says it listens."""
    port = free_port()
    argv = [node, str(EVERYTHING_SERVER), "streamableHttp"]
    async with _process(
        argv, {**env, "PORT": str(port)}, "MCP Streamable HTTP Server listening", tmp, "everything", from_stderr=True
    ) as server:
        server.url = f"http://127.0.0.1:{port}/mcp"
        yield server


# -- clients ---------------------------------------------------------------------------------


async def run_ts(
    node: str,
    run: WrapRun,
    env: dict[str, str],
    steps: list[dict],
    *,
    sdk: str = "v1",
    mode: str | None = None,
    answer: dict | None = None,
) -> list[dict]:
    """Run tests/e2e/ts_remote_client.mjs against `run`; return its output lines (after
    checking it connected and closed)."""
    spec = {
        "sdk": sdk,
        "mode": mode,
        "command": run.argv[0],
        "args": run.argv[1:],
        "answer": answer,
        "steps": steps,
        "timeoutMs": int(RUN_TIMEOUT * 1000),
    }
    with trio.fail_after(RUN_TIMEOUT + 30):
        proc = await trio.run_process(
            [node, str(TS_REMOTE_CLIENT)],
            stdin=json.dumps(spec).encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=str(E2E),
            env=env,
        )
    run.stderr.write_bytes(proc.stderr)
    out = proc.stdout.decode()
    assert proc.returncode == 0, (
        f"ts_remote_client exited {proc.returncode}\nstdout:\n{out}\nstderr:\n{run.stderr_text()}"
    )
    lines = [json.loads(line) for line in out.splitlines()]
    assert [ln["kind"] for ln in lines] == ["connected"] + [s["op"] for s in steps] + ["closed"], out
    return lines


class RawClient:
    """A bare stdio peer of wrap: newline-delimited JSON-RPC frames in and out."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.frames: list[dict] = []
        self.eof = trio.Event()
        self._changed = trio.Event()
        self._buf = b""

    async def send(self, *frames: dict) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(b"".join(json.dumps(f).encode() + b"\n" for f in frames))

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def pump(self) -> None:
        assert self.process.stdout is not None
        async for chunk in self.process.stdout:
            self._buf += chunk
            *complete, self._buf = self._buf.split(b"\n")
            self.frames.extend(json.loads(line) for line in complete if line.strip())
            self._changed.set()
            self._changed = trio.Event()
        self.eof.set()
        self._changed.set()

    def answer(self, request_id: object) -> dict | None:
        return next((f for f in self.frames if f.get("id") == request_id and "method" not in f), None)

    async def wait_answers(self, ids: list[object], timeout: float = RUN_TIMEOUT) -> list[dict]:
        with trio.fail_after(timeout):
            while any(self.answer(i) is None for i in ids):
                if self.eof.is_set():
                    missing = [i for i in ids if self.answer(i) is None]
                    raise AssertionError(f"wrap closed its stdout without answering {missing}; frames: {self.frames}")
                await self._changed.wait()
        return [self.answer(i) for i in ids]  # type: ignore[misc]


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "assay-e2e-raw", "version": "1.0.0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(request_id: int, name: str, arguments: dict | None = None) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments or {}},
    }


@asynccontextmanager
async def raw_wrap(run: WrapRun, env: dict[str, str]) -> AsyncIterator[RawClient]:
    """wrap as a real process with a raw client on its stdio; wrap's stderr goes to run.stderr.
    On exit, wrap is killed if it is still running (a test that expects it to end checks that
    first, with :func:`wait_exit`)."""
    with run.stderr.open("wb") as errlog:
        async with trio.open_nursery() as nursery:
            proc = await trio.lowlevel.open_process(
                run.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, env=env
            )
            client = RawClient(proc)
            nursery.start_soon(client.pump)
            try:
                yield client
            finally:
                if proc.returncode is None:
                    proc.kill()
                with trio.move_on_after(30):
                    await proc.wait()
                nursery.cancel_scope.cancel()


async def wait_exit(process: trio.Process, timeout: float = RUN_TIMEOUT) -> int:
    with trio.fail_after(timeout):
        return await process.wait()


def wrap_stderr(run: WrapRun) -> list[str]:
    return run.stderr_text().splitlines()


def all_text(run: WrapRun, *more: Path) -> str:
    """Everything wrap wrote down (stderr, decision and audit logs, `more` files)."""
    parts = [run.stderr_text()]
    for path in (run.decision_log, run.audit_log, *more):
        if path.exists():
            parts.append(path.read_text(errors="replace"))
    return "\n".join(parts)


def free_closed_port() -> tuple[socket.socket, int]:
    """A socket bound to a port on 127.0.0.1 that does not listen: a connection to it is refused
    for as long as the socket stays open (no race with another process taking the port)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s, int(s.getsockname()[1])
