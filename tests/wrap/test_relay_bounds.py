"""The relay's bounds on wrap's own replies (docs/wrap.md, "Output to the client"), driven in
process: a real child, the client on trio memory streams, the waits on trio's own scheduler
(``wait_all_tasks_blocked``) and on the child's FIFO, never on sleeps."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import trio
import trio.testing

from assay.policy import load_policy
from assay.shells.stdio import relay as relay_mod
from assay.shells.stdio.relay import Relay
from assay.session.session import SessionOptions, WrapSession

HOLD = 4096  # a server line longer than this is streamed through
QUEUE = 8192  # wrap's replies held beyond this stop the client pump
CALLS = 120


def denied(rid: int) -> bytes:
    return (
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "tools/call",
                "params": {"name": "exec", "arguments": {"pad": "p" * 200}},
            }
        ).encode()
        + b"\n"
    )


async def test_replies_held_for_a_streamed_server_line_stop_the_client_pump_at_the_bound(tmp_path, monkeypatch):
    """While a server line longer than the hold limit is streamed, wrap's deny replies wait for
    it to end. Past the queue bound the relay stops reading the client (the client sees
    back-pressure) instead of keeping every reply; once the line ends, every reply goes out in
    order and the rest of the client's calls are read and answered. Nothing is lost."""
    monkeypatch.setattr(relay_mod, "REPLY_QUEUE_LIMIT", QUEUE)
    go = tmp_path / "go"
    os.mkfifo(go)
    server = tmp_path / "server.py"
    server.write_text(
        textwrap.dedent(f"""
        import os, sys
        os.write(1, b'{{"jsonrpc":"2.0","method":"notifications/message","params":{{"data":"' + b"s" * {HOLD * 2})
        with open({str(go)!r}) as f:  # the test says when the line ends
            f.read()
        os.write(1, b'"}}}}\\n')
        sys.stdin.read()  # until wrap closes our stdin
    """)
    )
    session = WrapSession(
        load_policy(b'version: "2.0"\ntools:\n  deny: ["exec"]\n'),
        SessionOptions(server_hold_limit=HOLD, shutdown_grace=30.0),
    )
    to_wrap, client_in = trio.testing.memory_stream_one_way_pair()
    client_out, from_wrap = trio.testing.memory_stream_one_way_pair()
    relay = Relay(
        [sys.executable, str(server)],
        session,
        client_in=client_in,
        client_out=client_out,
        sinks={},
        warn=lambda line: None,
        handle_signals=False,
    )
    received = bytearray()

    async def read_until(predicate) -> None:
        while not predicate(received):
            data = await from_wrap.receive_some(1 << 16)
            assert data, "wrap closed its output early"
            received.extend(data)

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            result: list = []

            async def run() -> None:
                result.append(await relay.run())

            nursery.start_soon(run)
            await to_wrap.send_all(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
            await read_until(lambda got: len(got) > HOLD)  # the server's line is being streamed
            for i in range(1, CALLS + 1):  # one read each: the pump looks at the bound after each
                await to_wrap.send_all(denied(i))
                await trio.testing.wait_all_tasks_blocked()
            held_at_pause = session.held_bytes
            assert b'"id":1,' not in bytes(received)  # nothing of them got inside the server's line
            await trio.Path(go).write_text("end")
            await read_until(lambda got: got.count(b"\n") >= CALLS + 1)
            lines = bytes(received).split(b"\n")
            assert lines[0].endswith(b'"}}') and len(lines[0]) > HOLD * 2
            ids = [json.loads(line)["id"] for line in lines[1 : CALLS + 1]]
            assert ids == list(range(1, CALLS + 1))  # every call answered, in order
            assert all(json.loads(line)["result"]["isError"] is True for line in lines[1 : CALLS + 1])
            # the pump stopped at the bound: it held one reply past it, not all of them
            longest = max(len(line) + 1 for line in lines[1 : CALLS + 1])
            assert sum(len(line) + 1 for line in lines[1 : CALLS + 1]) > 2 * QUEUE
            assert QUEUE < held_at_pause <= QUEUE + longest
            assert session.held_bytes == 0
            await to_wrap.aclose()  # client EOF: wrap closes the child's stdin, the child exits
    assert result[0].child_returncode == 0
