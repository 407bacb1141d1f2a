"""End to end: a dropped event stream is resumed (docs/remote.md, "Answers and streams").

The server closes a call's event stream after a progress notification and before its answer;
the events had ids, so wrap waits the server's `retry`, asks for the rest with a GET carrying
`Last-Event-ID`, and relays the answer. Against a server that cannot resume (it answers that GET
405), the call gets wrap's error and the session goes on. The servers are the SDK's MCPServer
with an event store (tests/e2e/remote_server.py --resumable) and the same server with its
`dropid` front.
"""

from __future__ import annotations

import pytest

from _remote_support import INITIALIZE, INITIALIZED, call, raw_wrap, remote_run, remote_server, wait_exit

END_TIMEOUT = 30.0


def _with_progress(frame: dict, token: str) -> dict:
    return {**frame, "params": {**frame["params"], "_meta": {"progressToken": token}}}


async def test_a_dropped_stream_is_resumed_with_last_event_id(tmp_path, base_env):
    """The `drop` call's stream ends after its progress notification; wrap resumes it and the
    client gets the server's answer, and the notification once."""
    async with remote_server(tmp_path, base_env, resumable=True) as server:
        run = remote_run(tmp_path, server.url)
        async with raw_wrap(run, base_env) as client:
            await client.send(INITIALIZE)
            await client.wait_answers([0])
            await client.send(INITIALIZED)
            await client.send(_with_progress(call(1, "drop"), "p1"))
            (answer,) = await client.wait_answers([1])
            await client.send(call(2, "echo", {"message": "after"}))
            (echo,) = await client.wait_answers([2])
            await client.close_stdin()
            code = await wait_exit(client.process, END_TIMEOUT)
        assert [ln for ln in server.lines if ln.startswith("RESUMED after ")], server.lines
    assert answer.get("result", {}).get("content") == [{"type": "text", "text": "answered after the drop"}], answer
    progress = [f for f in client.frames if f.get("method") == "notifications/progress"]
    assert [p["params"]["progressToken"] for p in progress] == ["p1"], progress
    assert echo["result"]["content"] == [{"type": "text", "text": "echo: after"}], echo
    assert code == 0, run.stderr_text()


@pytest.mark.parametrize("fault", ["dropid", "dropbadid"])
async def test_a_server_that_cannot_resume_gets_the_request_answered_with_an_error(tmp_path, base_env, fault):
    """The `dropid` call's stream ends after an event with an id and no answer; the server
    answers the GET with `Last-Event-ID` 405. wrap tries, gives up at once on that refusal,
    answers the call with its error, and the session goes on. An id that cannot be sent back in
    a header (`dropbadid`) is no id: wrap does not try."""
    async with remote_server(tmp_path, base_env, faults=(fault,)) as server:
        run = remote_run(tmp_path, server.url)
        async with raw_wrap(run, base_env) as client:
            await client.send(INITIALIZE)
            await client.wait_answers([0])
            await client.send(INITIALIZED)
            await client.send(call(1, "dropid"))
            (answer,) = await client.wait_answers([1])
            await client.send(call(2, "echo", {"message": "after"}))
            (echo,) = await client.wait_answers([2])
            await client.close_stdin()
            code = await wait_exit(client.process, END_TIMEOUT)
        refused = [ln for ln in server.lines if ln == "FAULT resume refused"]
    assert len(refused) == (1 if fault == "dropid" else 0), server.lines
    assert answer["error"]["code"] == -32000, answer
    assert "ended before its answer" in answer["error"]["message"], answer
    assert ("could not be resumed" in answer["error"]["message"]) == (fault == "dropid"), answer
    assert echo["result"]["content"] == [{"type": "text", "text": "echo: after"}], echo
    assert code == 0, run.stderr_text()
