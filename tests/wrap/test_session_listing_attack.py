"""A hostile server against what wrap reads of ``tools/list`` answers, in memory.

Pins (docs/wrap.md, "Tool pins"), the declared baseline ("Declared baseline") and
``--hide-denied-tools`` ("Hiding denied tools") all rest on wrap reading every tools/list answer
that reaches the client. Each test here is a server trick against that reading: the guard must
fail closed (the swapped or undeclared tool's calls are denied), never raise on server content,
and relay server lines byte for byte unless hiding cuts them.
"""

from __future__ import annotations

import json

from assay.wrap.session import SessionOptions, _read_head

from tests.wrap._harness import Harness
from tests.wrap.test_pins import EVIL, HONEST, answer, call, pinned_policy, request


def deny_code(reply: bytes | None) -> str | None:
    if reply is None:
        return None
    return json.loads(json.loads(reply)["result"]["content"][1]["text"])["error_code"]


def pinned_session() -> Harness:
    """A session whose client was shown the honest (pinned) read_file once."""
    s = Harness(pinned_policy(), SessionOptions())
    s.handle(request(1, "tools/list"))
    assert s.server_line(answer(1, [HONEST]))[0]
    assert s.handle(call(2)).disposition == "forwarded"
    assert s.server_line(b'{"jsonrpc":"2.0","id":2,"result":{"content":[]}}')[0]
    return s


# ---------------------------------------------------------------------------------------------
# an answer the quick head reader reads but the full reader gives up on
# ---------------------------------------------------------------------------------------------


def _deep_answer(rid: int, depth: int) -> bytes:
    """A tools/list answer carrying the swapped read_file, nested ``depth`` levels deep, with one
    invalid UTF-8 byte (the fast reader refuses it) and more values than the iterative
    reader's budget. JSON.parse reads it (any depth, U+FFFD for the byte): the client sees EVIL."""
    evil = json.dumps(EVIL)[:-1].encode()
    filler = b",".join([b"[]"] * 201_000)
    deep = b"[" * depth + b"]" * depth
    tool = evil + b', "x": "\xff", "deep": ' + deep + b', "many": [' + filler + b"]}"
    return b'{"jsonrpc":"2.0","id":%d,"result":{"tools":[%s]}}' % (rid, tool)


def _head_reader_limit() -> int:
    """The deepest nesting the head reader reads from here (it recurses, as does the standard
    library's reader, which the full read calls a few frames deeper)."""
    depth = 0
    for d in range(100, 5000):
        try:
            _read_head(b'{"result":' + b"[" * d + b"]" * d + b"}")
        except Exception:
            return depth
        depth = d
    return depth


def test_a_tools_list_answer_too_hard_to_read_in_full_still_fails_pins_closed():
    """Nesting a few levels short of the head reader's limit but past the standard library's:
    the head is read (an answer to the pending tools/list), the full line is over the work
    budget. Whatever the depth, the answer is relayed and the pinned tool is denied."""
    top = _head_reader_limit()
    for depth in range(top - 24, top - 1):
        s = pinned_session()
        s.handle(request(3, "tools/list"))
        relayed, _warnings = s.server_line(_deep_answer(3, depth))
        assert relayed, depth
        out = s.handle(call(4))
        assert out.disposition == "blocked", depth
        assert deny_code(out.reply) == "E_TOOL_DRIFT", depth


# ---------------------------------------------------------------------------------------------
# a reused id: which request an answer goes to
# ---------------------------------------------------------------------------------------------


def test_an_answer_to_a_reused_id_is_read_as_the_tools_list_answer_it_may_be():
    """A client reuses id 7: a tools/call, then a tools/list, both in flight. Both SDKs keep one
    handler per id (the latest request's), so the first answer with id 7 goes to tools/list.
    The server answers with the swapped read_file: wrap must read it, whichever request it
    matched it to, and deny the next call."""
    s = pinned_session()
    assert s.handle(call(7)).disposition == "forwarded"
    assert s.handle(request(7, "tools/list")).disposition == "forwarded"
    line = answer(7, [EVIL])
    assert s.server_line(line) == (True, [])
    out = s.handle(call(8))
    assert deny_code(out.reply) == "E_TOOL_DRIFT"
    # the second answer (the call's, or a tools/list answer) is read too, and still relayed
    relayed, _ = s.server_line(answer(7, [HONEST]))
    assert relayed
    assert deny_code(s.handle(call(9)).reply) == "E_TOOL_DRIFT"


def test_a_reused_id_keeps_the_pending_tools_list_for_the_unreadable_rule():
    """After the first answer of a reused id (tools/list still queued behind a tools/call), an
    answer wrap cannot read at all still counts as an unreadable tools/list answer."""
    s = pinned_session()
    s.handle(request(7, "tools/list"))
    s.handle(call(7))
    assert s.server_line(answer(7, [HONEST]))[0]
    assert s.handle(call(8)).disposition == "forwarded"
    s.server_line(b'{"jsonrpc":"2.0","id":8,"result":{"content":[]}}')
    s.handle(request(7, "tools/list"))
    too_deep = b'{"jsonrpc":"2.0","id":7,"result":{"tools":[' + b"[" * 3000 + b"]" * 3000 + b',"\xff"' + b",[]" * 201_000 + b"]}}"
    relayed, warnings = s.server_line(too_deep)
    assert relayed and warnings
    assert deny_code(s.handle(call(9)).reply) == "E_TOOL_DRIFT"
