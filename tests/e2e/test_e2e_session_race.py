"""A shared session under contention and crashes, with real wraps and a real SQLite file
(docs/wrap.md, "Shared sessions"): two wraps deciding at the same moment never both pass a
limit, and a wrap SIGKILLed in the middle of a decision leaves the database consistent with
exact counts (no call counted twice, none that reached a server lost)."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from tests.conftest import ASSAY

RUN_TIMEOUT = 120.0

RAW_SERVER = textwrap.dedent(
    """
    import json, sys
    log = open(sys.argv[1], "a")
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        if msg.get("method") == "tools/call":
            log.write(msg["params"]["name"] + "\\n")
            log.flush()
            result = {"content": [{"type": "text", "text": "ok"}]}
        else:
            result = {}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\\n")
        sys.stdout.flush()
    """
)


def call(rid: int) -> bytes:
    return (
        json.dumps(
            {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "work", "arguments": {"n": rid}}}
        ).encode()
        + b"\n"
    )


async def read_lines(stream: trio.abc.ReceiveStream, n: int) -> list[dict]:
    buf = b""
    out: list[dict] = []
    while len(out) < n:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        out.extend(json.loads(line) for line in lines if line)
    return out


@asynccontextmanager
async def process(argv: list[str], env: dict[str, str]) -> AsyncIterator[trio.Process]:
    """A real process with pipes to its stdin and stdout; killed if still running at the end."""
    proc = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
        with trio.CancelScope(shield=True):
            await proc.wait()
            await proc.stdin.aclose()
            await proc.stdout.aclose()


def wrap_argv(tmp: Path, policy: Path, state: Path, session: str, log: Path) -> list[str]:
    server = tmp / "raw_server.py"
    if not server.exists():
        server.write_text(RAW_SERVER)
    return [
        str(ASSAY),
        "mcp",
        "wrap",
        "--policy",
        str(policy),
        "--state-dir",
        str(state),
        "--shared-session",
        session,
        "--",
        sys.executable,
        str(server),
        str(log),
    ]


async def test_two_wraps_times_200_concurrent_calls_pass_exactly_max(tmp_path, base_env):
    policy = tmp_path / "assay.yaml"
    policy.write_text(
        'version: "2.0"\ntools:\n  allow: ["*"]\nsequences:\n  - { type: max_calls, id: fifty, tool: "*", max: 50 }\n'
    )
    state = tmp_path / "state"
    for run in range(8):  # every run is a race of 400 decisions on one limit (each a fresh session)
        logs = [tmp_path / f"served-{run}-{i}.txt" for i in range(2)]
        answers: list[list[dict]] = [[], []]

        async def one(i: int) -> None:
            argv = wrap_argv(tmp_path, policy, state, f"race-{run}", logs[i])
            async with process(argv, base_env) as proc:
                await proc.stdin.send_all(b"".join(call(rid) for rid in range(1, 201)))
                answers[i] = await read_lines(proc.stdout, 200)
                await proc.stdin.aclose()
                await proc.wait()

        with trio.fail_after(RUN_TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(one, 0)
                nursery.start_soon(one, 1)
        replies = answers[0] + answers[1]
        assert len(replies) == 400
        allowed = [r for r in replies if not r["result"].get("isError")]
        denied = [r for r in replies if r["result"].get("isError")]
        served = sum(len(p.read_text().splitlines()) for p in logs if p.exists())
        assert (len(allowed), len(denied), served) == (50, 350, 50), run
        assert all("fifty" in json.dumps(r) for r in denied)


def db_counts(state: Path, key: str) -> tuple[int, int]:
    with sqlite3.connect(state / "sessions.db") as db:
        assert db.execute("PRAGMA quick_check").fetchone() == ("ok",)
        row = db.execute("SELECT tool_calls, calls FROM sessions WHERE key = ?", (key,)).fetchone()
    return (0, 0) if row is None else row


async def test_sigkill_in_the_middle_of_a_decision_leaves_exact_counts(tmp_path, base_env):
    """36 wraps, each killed by the store's test hook in its k-th commit (after the writes,
    before COMMIT), k = 1 to 6 six times each in a shuffled order, four at once: the call being
    decided never reaches the server and is not counted."""
    policy = tmp_path / "assay.yaml"
    policy.write_text(
        'version: "2.0"\ntools:\n  allow: ["*"]\nsequences:\n  - { type: max_calls, tool: "*", max: 100000 }\n'
    )
    state = tmp_path / "state"
    log = tmp_path / "served.txt"
    rng = random.Random(22)
    answered = 0
    limiter = trio.CapacityLimiter(4)

    async def one(k: int) -> None:
        nonlocal answered
        async with limiter:
            env = {**base_env, "ASSAY_TEST_KILL_IN_COMMIT": str(k)}
            argv = wrap_argv(tmp_path, policy, state, "crash", log)
            async with process(argv, env) as proc:
                got = 0
                for rid in range(1, k + 3):
                    try:
                        await proc.stdin.send_all(call(rid))
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        break
                    lines = await read_lines(proc.stdout, 1)
                    if not lines:
                        break
                    assert not lines[0]["result"].get("isError"), lines
                    got += 1
                await proc.wait()
                assert proc.returncode == -9
                assert got == k - 1
                answered += got

    with trio.fail_after(RUN_TIMEOUT * 3):
        async with trio.open_nursery() as nursery:
            ks = [1 + i % 6 for i in range(36)]
            rng.shuffle(ks)
            for k in ks:
                nursery.start_soon(one, k)
    tool_calls, calls = db_counts(state, "name:crash")
    served = len(log.read_text().splitlines()) if log.exists() else 0
    assert (tool_calls, calls, served) == (answered, answered, answered)


async def _one_call_and_a_ping(argv: list[str], env: dict[str, str]) -> tuple[dict, dict, bytes]:
    async with process(argv, env) as proc:
        await proc.stdin.send_all(call(1))
        denied = (await read_lines(proc.stdout, 1))[0]
        await proc.stdin.send_all(b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n')
        ping = (await read_lines(proc.stdout, 1))[0]
        await proc.stdin.aclose()
        await proc.wait()
    return denied, ping, b""


async def _fails_closed(tmp_path: Path, base_env: dict[str, str], state: Path, extra: list[str], needle: str) -> None:
    policy = tmp_path / "assay.yaml"
    policy.write_text(
        'version: "2.0"\ntools:\n  allow: ["*"]\nsequences:\n  - { type: max_calls, tool: "*", max: 9 }\n'
    )
    stderr = tmp_path / "wrap.stderr"
    argv = [
        "/bin/sh",
        "-c",
        'exec "$@" 2>"$0"',
        str(stderr),
        *wrap_argv(tmp_path, policy, state, "broken", tmp_path / "served.txt")[:-4],
        *extra,
        "--",
        sys.executable,
        str(tmp_path / "raw_server.py"),
        str(tmp_path / "served.txt"),
    ]
    with trio.fail_after(RUN_TIMEOUT):
        denied, ping, _ = await _one_call_and_a_ping(argv, base_env)
    payload = denied["result"]["structuredContent"]
    assert payload["error_code"] == "E_SESSION_STATE" and needle in payload["reason"], payload
    assert ping == {"jsonrpc": "2.0", "id": 2, "result": {}}  # every other frame flows
    lines = [ln for ln in stderr.read_text().splitlines() if "shared session" in ln]
    assert len(lines) == 1 and needle in lines[0], stderr.read_text()
    assert "Traceback" not in stderr.read_text()
    assert (tmp_path / "served.txt").read_text() == ""  # the call never reached the server


async def test_a_corrupt_database_fails_closed_with_one_line(tmp_path, base_env):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "sessions.db").write_bytes(b"this is not a database" * 100)
    await _fails_closed(tmp_path, base_env, state, [], "not a database")


async def test_a_locked_database_fails_closed_after_the_deadline(tmp_path, base_env):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    holder = sqlite3.connect(state / "sessions.db", isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("BEGIN IMMEDIATE")  # another wrap in the middle of a long decision
    try:
        await _fails_closed(tmp_path, base_env, state, ["--session-lock-timeout", "0.3"], "locked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()


async def test_a_state_directory_that_is_a_file_fails_closed(tmp_path, base_env):
    state = tmp_path / "state"
    state.write_text("a file")
    await _fails_closed(tmp_path, base_env, state, [], "state")
