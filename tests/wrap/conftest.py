"""Helpers for process-level wrap tests: run `assay mcp wrap` over a recording child."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ASSAY

RECORDER = Path(__file__).parent / "fixtures" / "recording_server.py"

DENY_EXEC = 'version: "2.0"\ntools:\n  deny: ["exec"]\n'
ALLOWLIST = """version: "2.0"
tools:
  allow: ["read_file", "echo"]
  deny: ["exec"]
schemas:
  read_file:
    type: object
    additionalProperties: false
    required: [path]
    properties:
      path: {type: string, pattern: "^/workspace/"}
  echo:
    type: object
"""


@dataclass
class WrapRun:
    returncode: int
    stdout: bytes
    stderr: bytes
    record: bytes
    tmp: Path

    def replies(self) -> list[dict]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]

    def log(self, name: str) -> list[dict]:
        path = self.tmp / name
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class Wrapper:
    """Builds wrap command lines around the recording server in one temporary directory."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.record = tmp / "record.bin"
        self.policy = tmp / "assay.yaml"
        self.policy.write_text(ALLOWLIST)

    def argv(self, *wrap_opts: str, server_opts: tuple[str, ...] = ()) -> list[str]:
        return [
            str(ASSAY),
            "mcp",
            "wrap",
            "--policy",
            str(self.policy),
            *wrap_opts,
            "--",
            sys.executable,
            str(RECORDER),
            str(self.record),
            *server_opts,
        ]

    def run(self, frames: bytes, *wrap_opts: str, server_opts: tuple[str, ...] = (), timeout: float = 120) -> WrapRun:
        res = subprocess.run(
            self.argv(*wrap_opts, server_opts=server_opts),
            input=frames,
            capture_output=True,
            timeout=timeout,
            cwd=self.tmp,
        )
        record = self.record.read_bytes() if self.record.exists() else b""
        return WrapRun(res.returncode, res.stdout, res.stderr, record, self.tmp)

    def popen(self, *wrap_opts: str, server_opts: tuple[str, ...] = (), **kw) -> subprocess.Popen:
        return subprocess.Popen(
            self.argv(*wrap_opts, server_opts=server_opts),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=kw.pop("stderr", subprocess.PIPE),
            cwd=self.tmp,
            **kw,
        )


@pytest.fixture
def wrapper(tmp_path) -> Wrapper:
    return Wrapper(tmp_path)


def call(id_, name, arguments=None, **extra) -> bytes:
    params = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    msg = {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params, **extra}
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def request(id_, method, params=None) -> bytes:
    msg = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone, or exiting while read
        return False


def wait_dead(pid: int, timeout: float = 20.0) -> bool:
    """Wait for another process's death (an external event we can only observe by polling)."""
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not pid_alive(pid):
            return True
        time.sleep(0.02)
    return not pid_alive(pid)


def read_pid(path: Path, timeout: float = 30.0) -> int:
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def env_without_assay() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("ASSAY_")}


_PENDING: dict[int, bytes] = {}  # bytes read past a line end, per pipe


def read_line(stream, timeout: float = 60.0) -> bytes:
    """Read one line from a pipe, failing the test (not hanging) after ``timeout`` seconds."""
    import select
    import time

    fd = stream.fileno()
    buf = _PENDING.pop(fd, b"")
    end = time.monotonic() + timeout
    while b"\n" not in buf:
        left = end - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no complete line within {timeout}s (got {buf[:200]!r})")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return buf
            buf += chunk
    line, _, rest = buf.partition(b"\n")
    if rest:
        _PENDING[fd] = rest
    return line + b"\n"


def exchange(proc: subprocess.Popen, frame: bytes, timeout: float = 60.0) -> dict:
    """Send one request line and wait for its one-line answer."""
    proc.stdin.write(frame)
    proc.stdin.flush()
    return json.loads(read_line(proc.stdout, timeout))


def stop_and_close(proc: subprocess.Popen) -> None:
    """Test cleanup: kill the process if it is still running, reap it, close its pipes."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except (BrokenPipeError, ValueError):
                pass
