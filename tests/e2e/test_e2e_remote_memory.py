"""End to end: the memory of `assay mcp wrap --url` is bounded by its documented budget when the
client stops reading (docs/remote.md, "Answers and streams").

The server (tests/e2e/remote_server.py with its `fastbig` front) answers 48 calls at once with
event streams of 6 MiB each; the client reads nothing until the server has handed every answer
to its connection, then reads them all. wrap counts what waits for the client in the budget
and stops reading a stream while it is over, so its peak resident memory (the kernel's own
figure, /proc/<pid>/status VmHWM) stays far below what 48 answers and their copies would take.
"""

from __future__ import annotations

import json
import subprocess

import trio

from _remote_support import INITIALIZE, INITIALIZED, call, remote_run, remote_server

CALLS = 48
SIZE = 6 << 20
CAP = 8 << 20
PEAK_LIMIT_KIB = 400 << 10


def _peak_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status", encoding="ascii"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/<pid>/status")


async def _lines(stream: trio.abc.ReceiveStream, count: int) -> list[bytes]:
    """The next `count` lines of `stream` (more may have come)."""
    buf = bytearray()
    lines: list[bytes] = []
    while len(lines) < count:
        chunk = await stream.receive_some(1 << 20)
        assert chunk, f"wrap closed its output after {len(lines)} lines"
        buf += chunk
        while (end := buf.find(b"\n")) >= 0 and len(lines) < count:
            lines.append(bytes(buf[:end]))
            del buf[: end + 1]
    return lines


async def test_48_big_answers_for_a_client_that_reads_nothing_stay_in_the_budget(tmp_path, base_env):
    """docs/remote.md, "Answers and streams": 48 answers of 6 MiB (cap 8 MiB, held budget
    256 MiB) for a client that reads nothing until all are sent: wrap's peak resident memory
    stays under 400 MiB, and every answer arrives whole."""
    async with remote_server(tmp_path, base_env, faults=("fastbig",)) as server:
        run = remote_run(tmp_path, server.url, extra=["--max-frame-bytes", str(CAP)])
        with run.stderr.open("wb") as errlog, trio.fail_after(240):
            proc = await trio.lowlevel.open_process(
                run.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, env=base_env
            )
            assert proc.stdin is not None and proc.stdout is not None
            try:
                await proc.stdin.send_all(json.dumps(INITIALIZE).encode() + b"\n")
                (first,) = await _lines(proc.stdout, 1)
                assert json.loads(first)["id"] == 0, first[:200]
                frames = [INITIALIZED, *(call(i, "big", {"size": SIZE}) for i in range(1, CALLS + 1))]
                await proc.stdin.send_all(b"".join(json.dumps(f).encode() + b"\n" for f in frames))
                await server.wait_for("SENT big", CALLS, timeout=180)
                answers = [json.loads(line) for line in await _lines(proc.stdout, CALLS)]
                peak = _peak_kib(proc.pid)
                await proc.stdin.aclose()
                assert await proc.wait() == 0, run.stderr_text()
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
    assert sorted(a["id"] for a in answers) == list(range(1, CALLS + 1))
    assert all(len(a["result"]["content"][0]["text"]) == SIZE for a in answers), [a.get("error") for a in answers]
    assert peak < PEAK_LIMIT_KIB, f"wrap's peak resident memory was {peak >> 10} MiB"
    print(f"wrap's peak resident memory: {peak >> 10} MiB")
