"""The server side on its own, in memory (docs/wrap.md, "Dropped server responses", "Tool
pins"): pending requests, dropped answers, streamed lines with wrap's replies held behind them,
tools/list chains and identities, and server requests that use wrap's approval ids."""

from __future__ import annotations

import json
from typing import Any

from assay.policy import SessionState, load_policy
from assay.session.effects import Effect, ToClient, Warn
from assay.session.server_side import ServerSide, Stream
from assay.session.toolbook import ToolBook

POLICY = load_policy(b'version: "2.0"\ntools:\n  allow: ["echo"]\n  deny: ["exec"]\n')
PREFIX = "assay-approval-0123456789abcdef0123456789abcdef-"


def server(*, hold_limit: int = 1 << 20, hide: bool = False, verbose: bool = False) -> ServerSide:
    book = ToolBook(POLICY, SessionState(), "srv", verbose=verbose, hide=hide, baseline=None)
    return ServerSide(book, hold_limit, PREFIX)


def jl(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def to_client(out: list[Effect]) -> bytes:
    return b"".join(e.data for e in out if isinstance(e, ToClient))


def tools_answer(rid: Any, names: list[str], cursor: str | None = None, **tool: Any) -> bytes:
    result: dict[str, Any] = {"tools": [{"name": n, "inputSchema": {"type": "object"}, **tool} for n in names]}
    if cursor is not None:
        result["nextCursor"] = cursor
    return jl({"jsonrpc": "2.0", "id": rid, "result": result})


def test_an_answer_to_a_pending_request_is_relayed_once():
    s = server()
    s.request(1, "ping", None)
    answer = jl({"jsonrpc": "2.0", "id": 1, "result": {}})
    out: list[Effect] = []
    s.receive(answer, out)
    assert to_client(out) == answer and not s.pending
    out = []
    s.receive(answer, out)
    assert to_client(out) == b"" and s.dropped_responses == 1 and isinstance(out[0], Warn)


def test_server_requests_and_notifications_are_relayed_unless_they_use_an_approval_id():
    s = server()
    note = jl({"jsonrpc": "2.0", "method": "notifications/progress"})
    forged = jl({"jsonrpc": "2.0", "id": PREFIX + "1", "method": "sampling/createMessage"})
    out: list[Effect] = []
    s.receive(note + forged, out)
    assert to_client(out) == note and [type(e) for e in out] == [Warn, ToClient]


def test_a_long_line_streams_and_wraps_replies_wait_for_its_end():
    s = server(hold_limit=100)
    out: list[Effect] = []
    s.receive(b"x" * 150, out)
    assert s.stream is Stream.STREAMING and to_client(out) == b"x" * 150
    s.reply(b"reply\n", out)
    assert s.held_bytes == 6 and to_client(out) == b"x" * 150
    out = []
    s.receive(b"yy\nnext", out)
    assert to_client(out) == b"yy\nreply\n" and s.stream is Stream.LINES and s.held_bytes == 0
    out = []
    s.closed(out)
    assert to_client(out) == b"next"  # an unterminated last line is relayed as it is


def test_a_partial_line_is_held_until_its_end():
    s = server()
    s.request(5, "ping", None)
    answer = jl({"jsonrpc": "2.0", "id": 5, "result": {}})
    out: list[Effect] = []
    s.receive(answer[:7], out)
    assert out == []
    s.receive(answer[7:], out)
    assert to_client(out) == answer


def test_tools_list_pages_make_one_chain_and_identities():
    s = server(verbose=True)
    s.request(1, "tools/list", None)
    out: list[Effect] = []
    s.receive(tools_answer(1, ["echo"], cursor="c2", outputSchema={"type": "object"}), out)
    first = s.tools.last_chain
    assert first is not None and first.next_cursor == "c2"
    s.request(2, "tools/list", {"cursor": "c2"})
    s.receive(tools_answer(2, ["exec"]), out)
    assert s.tools.last_chain is first and s.tools.pending_lists == set()
    assert set(s.tools.bindings) == {"echo", "exec"}
    assert s.tools.may_have_output_schema("echo") and not s.tools.may_have_output_schema("exec")
    assert any(isinstance(e, Warn) for e in out)  # --verbose: one line per tool identity
    s.request(3, "tools/list", {"cursor": "other"})
    assert s.tools.chains[next(iter(s.tools.chains))] is not first


def test_hiding_takes_denied_tools_out_of_the_answer():
    s = server(hide=True)
    s.request(1, "tools/list", None)
    out: list[Effect] = []
    s.receive(tools_answer(1, ["echo", "exec"]), out)
    names = [t["name"] for t in json.loads(to_client(out))["result"]["tools"]]
    assert names == ["echo"]


def test_a_tools_list_answer_too_long_to_read_makes_identities_unknown():
    s = server(hold_limit=50)
    s.request(1, "tools/list", None)
    out: list[Effect] = []
    s.receive(tools_answer(1, ["echo"] * 5)[:-1], out)
    assert s.stream is Stream.STREAMING and s.tools.state.unreadable
    assert s.tools.may_have_output_schema("anything")
