"""The relay never waits for the shared session's store (docs/wrap.md, "Shared sessions"), with
real wraps, a real SQLite file and real processes: while another process holds the store's
write lock, a ping sent after a call that waits for the store is answered at once, and the call
is decided once the lock is free; while one server's wrap reads and remembers a 7.5 MiB hostile
answer full of secret-shaped words, another server's wrap of the same session takes calls
without a deny or a delay."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import trio

from tests.conftest import ASSAY
from tests.e2e.test_e2e_session_race import RAW_SERVER, call, process

HOLDER = textwrap.dedent(
    """
    import sqlite3, sys
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("BEGIN IMMEDIATE")  # another wrap in the middle of a long decision
    print("held", flush=True)
    sys.stdin.readline()
    db.execute("ROLLBACK")
    print("released", flush=True)
    """
)

HOSTILE_SERVER = textwrap.dedent(
    """
    import json, random, string, sys
    rng = random.Random(7)
    alnum = string.ascii_letters + string.digits
    words = ["ghp_" + "".join(rng.choice(alnum) for _ in range(36)) for _ in range(4096)]
    text = " ".join(words[i % len(words)] + str(i) for i in range(180_000))[: 7_500_000]
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        if msg.get("method") == "tools/call" and msg["params"]["name"] == "dump":
            result = {"content": [{"type": "text", "text": text}]}
        else:
            result = {"content": [{"type": "text", "text": "ok"}]}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\\n")
        sys.stdout.flush()
    """
)


class Lines:
    """A process's stdout, line by line, with the time each line arrived."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def next(self) -> tuple[dict, float]:
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some(1 << 20)
            assert chunk, "the stream ended"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line), time.monotonic()


async def read_line(stream: trio.abc.ReceiveStream) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        assert chunk, "the stream ended"
        data += chunk
    return data


def wrap(tmp: Path, policy: Path, state: Path, server: Path, label: str, *extra: str) -> list[str]:
    return [
        str(ASSAY),
        "mcp",
        "wrap",
        "--policy",
        str(policy),
        "--state-dir",
        str(state),
        "--shared-session",
        "agent",
        "--label",
        label,
        *extra,
        "--",
        sys.executable,
        str(server),
        str(tmp / f"served-{label}.txt"),
    ]


async def test_a_ping_is_answered_while_a_call_waits_for_a_locked_store(tmp_path, base_env):
    policy = tmp_path / "assay.yaml"
    policy.write_text(
        'version: "2.0"\ntools:\n  allow: ["*"]\nsequences:\n  - { type: max_calls, tool: "*", max: 9 }\n'
    )
    server = tmp_path / "raw_server.py"
    server.write_text(RAW_SERVER)
    (tmp_path / "holder.py").write_text(HOLDER)
    state = tmp_path / "state"
    with trio.fail_after(60):
        async with process(wrap(tmp_path, policy, state, server, "a", "--session-lock-timeout", "10"), base_env) as w:
            out = Lines(w.stdout)
            await w.stdin.send_all(call(1))  # the store is made, and the wrap has it open
            assert "isError" not in (await out.next())[0]["result"]
            holder = await trio.lowlevel.open_process(
                [sys.executable, str(tmp_path / "holder.py"), str(state / "sessions.db")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=base_env,
            )
            try:
                assert await read_line(holder.stdout) == b"held\n"
                held = time.monotonic()
                await w.stdin.send_all(call(2))
                sent = time.monotonic()
                await w.stdin.send_all(b'{"jsonrpc":"2.0","id":3,"method":"ping"}\n')
                ping, ping_at = await out.next()
                assert ping["id"] == 3  # before the call, which waits for the store
                assert ping_at - sent < 0.150, ping_at - sent
                await trio.sleep(max(0.0, 1.5 - (time.monotonic() - held)))  # the hold
                await holder.stdin.send_all(b"release\n")
                assert await read_line(holder.stdout) == b"released\n"
                released = time.monotonic()
                decided, decided_at = await out.next()
                assert decided["id"] == 2 and "isError" not in decided["result"], decided
                assert decided_at >= released
            finally:
                holder.kill()
                await holder.wait()
            await w.stdin.aclose()
            await w.wait()
    assert (tmp_path / "served-a.txt").read_text().splitlines() == ["work", "work"]


async def test_a_hostile_answer_on_one_server_neither_denies_nor_delays_the_other_servers_calls(tmp_path, base_env):
    policy = tmp_path / "assay.yaml"
    policy.write_text(
        'version: "2.0"\ntools:\n  allow: ["*"]\ninspect:\n  secrets: flag\n  arguments: { tainted: deny }\n'
    )
    hostile = tmp_path / "hostile_server.py"
    hostile.write_text(HOSTILE_SERVER)
    plain = tmp_path / "raw_server.py"
    plain.write_text(RAW_SERVER)
    state = tmp_path / "state"
    latencies: list[float] = []
    answers: list[dict] = []
    with trio.fail_after(120):
        async with (
            process(wrap(tmp_path, policy, state, hostile, "a"), base_env) as a,
            process(wrap(tmp_path, policy, state, plain, "b"), base_env) as b,
        ):
            a_out, b_out = Lines(a.stdout), Lines(b.stdout)
            for proc, out in ((a, a_out), (b, b_out)):  # both wraps started, the store made
                await proc.stdin.send_all(call(1))
                await out.next()
            dumped = trio.Event()

            async def dump() -> None:
                await a.stdin.send_all(
                    json.dumps(
                        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "dump", "arguments": {}}}
                    ).encode()
                    + b"\n"
                )
                answer, _ = await a_out.next()
                assert answer["id"] == 2 and "ghp_" in answer["result"]["content"][0]["text"]
                dumped.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(dump)
                rid = 100
                after = 0
                while after < 20:  # calls all along, and 20 more once the answer is remembered
                    rid += 1
                    begin = time.monotonic()
                    await b.stdin.send_all(call(rid))
                    answer, at = await b_out.next()
                    latencies.append(at - begin)
                    answers.append(answer)
                    if dumped.is_set():
                        after += 1
                    await trio.sleep(random.uniform(0.0, 0.01))
            for proc in (a, b):
                await proc.stdin.aclose()
                await proc.wait()
    denied = [x for x in answers if x["result"].get("isError")]
    assert denied == []
    # the other server's calls are not held up by the merge: on a quiet machine none takes more
    # than 50 ms; a loaded test machine adds scheduling noise to single calls, so the bound is on
    # nine in ten, and no call comes near the seconds a merge held the store for before
    ordered = sorted(latencies)
    assert len(ordered) > 20 and ordered[int(len(ordered) * 0.9)] <= 0.050, ordered[-10:]
    assert ordered[-1] < 1.0, ordered[-10:]
