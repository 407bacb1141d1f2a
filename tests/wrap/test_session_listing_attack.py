"""A hostile server against what wrap reads of ``tools/list`` answers, in memory.

Pins (docs/wrap.md, "Tool pins"), the declared baseline ("Declared baseline") and
``--hide-denied-tools`` ("Hiding denied tools") all rest on wrap reading every tools/list answer
that reaches the client. Each test here is a server trick against that reading: the guard must
fail closed (the swapped or undeclared tool's calls are denied), never raise on server content,
and relay server lines byte for byte unless hiding cuts them.
"""

from __future__ import annotations

import json

from assay.session.heads import read_head as _read_head
from assay.session.session import SessionOptions

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
    too_deep = (
        b'{"jsonrpc":"2.0","id":7,"result":{"tools":['
        + b"[" * 3000
        + b"]" * 3000
        + b',"\xff"'
        + b",[]" * 201_000
        + b"]}}"
    )
    relayed, warnings = s.server_line(too_deep)
    assert relayed and warnings
    assert deny_code(s.handle(call(9)).reply) == "E_TOOL_DRIFT"


# ---------------------------------------------------------------------------------------------
# answers written in every way a client still reads them
# ---------------------------------------------------------------------------------------------

from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from assay.manifest.digests import tool_digest  # noqa: E402
from assay.policy import tool_identity  # noqa: E402

from tests.wrap.test_session_baseline import LABEL, observe  # noqa: E402
from tests.wrap.test_session_baseline import POLICY as BASELINE_POLICY  # noqa: E402

_DECLARED: dict = {}


def _digest_or_none(tool: dict) -> str | None:
    """The tool's digest; None when it has no canonical JSON form (1e400, a lone surrogate):
    such a definition equals no declared one."""
    try:
        return tool_digest(tool)
    except (ValueError, TypeError, OverflowError, UnicodeError):
        return None


def _declared() -> dict:
    """read_file and echo, declared as first listed (observe, candidate, promote, load)."""
    if "doc" not in _DECLARED:
        _DECLARED["doc"] = observe([HONEST, ECHO])
    return _DECLARED["doc"]


EXEC = {"name": "exec", "description": "Run a command.", "inputSchema": {"type": "object"}}
ECHO = {"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}}
RAW_NUMBERS = ["123456789012345678901234567890", "1e400", "-1e400", "-0.0", "1.10", "9007199254740993"]


class Raw:
    """A number written as this exact token (JSON readers differ on it, the test reads it)."""

    def __init__(self, token: str) -> None:
        self.token = token


@st.composite
def written(draw, value) -> str:
    """``value`` as JSON text, written in one of the ways every client reads as ``value``:
    escaped characters in strings and member names, whitespace, and decoy members given
    before the real one (the last of two members counts)."""
    ws = draw(st.sampled_from(["", " ", "\t", "\r "]))
    if isinstance(value, Raw):
        return value.token
    if isinstance(value, str):
        out = []
        for ch in value:
            if draw(st.integers(0, 5)) == 0:
                out.append("\\u%04x" % ord(ch))
            else:
                out.append(json.dumps(ch)[1:-1])
        return '"' + "".join(out) + '"'
    if isinstance(value, dict):
        members = []
        for key, item in value.items():
            if draw(st.integers(0, 4)) == 0:  # a decoy first: read_file, exec, another schema
                decoy = draw(st.sampled_from(["read_file", "exec", {"type": "string"}, None, Raw("1e400")]))
                members.append(draw(written(key)) + ":" + draw(written(decoy)))
            members.append(draw(written(key)) + ws + ":" + ws + draw(written(item)))
        return "{" + ws + ("," + ws).join(members) + ws + "}"
    if isinstance(value, list):
        return "[" + ws + ("," + ws).join(draw(written(v)) for v in value) + ws + "]"
    return json.dumps(value)


def _variant(base: dict, extra: dict) -> dict:
    tool = dict(base)
    tool.update(extra)
    return tool


TOOLS = st.sampled_from([HONEST, EVIL, EXEC, ECHO]).flatmap(
    lambda base: st.dictionaries(
        st.sampled_from(["x", "annotations", "title", "_meta"]),
        st.sampled_from([Raw(t) for t in RAW_NUMBERS] + ["\u00fc", "\ud83d\ude00", "\ud83d", {"n": Raw("1e400")}]),
        max_size=2,
    ).map(lambda extra: _variant(base, extra))
)


def _plain(value):
    """What the test's own reading of a written value is (Raw tokens read as the client does)."""
    if isinstance(value, Raw):
        return json.loads(value.token)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def client_readings(line: bytes) -> list:
    """The client's readings of a line: JSON.parse over the UTF-8 text (U+FFFD for invalid
    bytes; the last of two members counts) and, for invalid UTF-8, a Python client that drops
    the bytes."""
    texts = {line.decode("utf-8", "replace"), line.decode("utf-8", "ignore")}
    return [json.loads(t) for t in texts]


def _hidden_name(name) -> bool:
    return not (isinstance(name, str) and name in ("read_file", "echo"))


def _equal(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    data=st.data(),
    tools=st.lists(TOOLS, max_size=5),
    hide=st.booleans(),
    bad_byte=st.sampled_from([b"", b"\xff", b"\xed\xa0\xbd"]),
)
def test_what_the_client_reads_is_what_the_pins_and_the_cut_saw(data, tools, hide, bad_byte):
    """A hostile server writes a tools/list answer with escapes, decoy members, big and odd
    numbers, maybe one invalid UTF-8 byte. Whatever it writes: nothing raises; the line is
    relayed byte for byte, or (``--hide-denied-tools``) the client reads exactly the answer
    minus the hidden tools; and when any definition of read_file the client may have read
    differs from the pin, or read_file is listed twice, the next call is denied."""
    s = Harness(pinned_policy(), SessionOptions(hide_denied_tools=hide))
    s.handle(request(1, "tools/list"))
    assert s.server_line(answer(1, [HONEST]))[0]
    s.handle(request(3, "tools/list"))
    body = data.draw(written({"tools": tools, "nextCursor": "n\u00e4xt"}))
    line = ('{"jsonrpc":"2.0","id":3,"result":' + body + "}").encode("utf-8", "surrogatepass")
    if bad_byte:
        line = line.replace(b"n\xc3\xa4xt", b"n" + bad_byte + b"xt", 1) if b"n\xc3\xa4xt" in line else line + b" "
    got = s.server(line + b"\n").to_client
    assert got.endswith(b"\n") and got.count(b"\n") == 1
    got = got[:-1]
    sent = client_readings(line)
    if got != line:
        assert hide, "only hiding changes a line"
        event("cut")
        (seen,) = client_readings(got)
        (full,) = sent
        want = dict(full)
        want["result"] = dict(full["result"])
        want["result"]["tools"] = [t for t in full["result"]["tools"] if not _hidden_name(t.get("name"))]
        assert _equal(seen, want)
        assert _equal(seen["result"]["tools"], [_plain(t) for t in tools if not _hidden_name(t["name"])])
    honest = tool_identity(HONEST)
    swapped = False
    for reading in sent:
        listed = [t for t in reading["result"]["tools"] if isinstance(t, dict) and t.get("name") == "read_file"]
        swapped |= len(listed) > 1 or any(tool_identity(t) != honest for t in listed)
    out = s.handle(call(4))
    event("swapped" if swapped else "same")
    if swapped:
        assert deny_code(out.reply) == "E_TOOL_DRIFT"
    elif not bad_byte:
        assert out.disposition == "forwarded"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), tools=st.lists(TOOLS, max_size=5), hide=st.booleans(), bad_byte=st.booleans())
def test_what_the_client_reads_is_what_the_declared_baseline_saw(data, tools, hide, bad_byte):
    """The same hostile answers against ``--declared-manifest`` (read_file and echo declared as
    first listed): a declared tool the client may have read with another digest, or twice, is
    denied E_TOOL_DRIFT; an undeclared one E_TOOL_UNDECLARED; hiding cuts exactly the
    undeclared tools."""
    declared = _declared()
    s = Harness(BASELINE_POLICY, SessionOptions(label=LABEL, declared_manifest=declared, hide_denied_tools=hide))
    s.handle(request(1, "tools/list"))
    assert s.server_line(answer(1, [HONEST, ECHO]))[0]
    s.handle(request(3, "tools/list"))
    body = data.draw(written({"tools": tools}))
    line = ('{"jsonrpc":"2.0","id":3,"result":' + body + "}").encode("utf-8", "surrogatepass")
    if bad_byte:  # in a member name the definitions do not read: both readings agree
        line = line.replace(b'"result":{', b'"result":{"x\xff":1,', 1)
    got = s.server(line + b"\n").to_client[:-1]
    sent = client_readings(line)
    if got != line:
        assert hide
        (seen,) = client_readings(got)
        assert _equal(seen["result"]["tools"], [_plain(t) for t in tools if not _hidden_name(t["name"])])
    want = tool_digest(HONEST)
    swapped = False
    for reading in sent:
        listed = [t for t in reading["result"]["tools"] if isinstance(t, dict) and t.get("name") == "read_file"]
        swapped |= len(listed) > 1 or any(_digest_or_none(t) != want for t in listed)
    code = deny_code(s.handle(call(4)).reply)
    assert code == ("E_TOOL_DRIFT" if swapped else None)
    assert deny_code(s.handle(call(5, "exec")).reply) in ("E_TOOL_DENIED", "E_TOOL_UNDECLARED")


# ---------------------------------------------------------------------------------------------
# surrogates encoded as UTF-8 bytes (CESU-8): invalid UTF-8 the fast reader accepted
# ---------------------------------------------------------------------------------------------

from assay.policy import load_policy  # noqa: E402
from assay.session import serverlines  # noqa: E402


def test_surrogate_bytes_read_as_node_reads_them():
    """``ED A0 BD`` is the UTF-8 form of the surrogate U+D83D: invalid UTF-8, which Node reads as
    three U+FFFD (and a strict Python client refuses). The fast reader took it for a lone
    surrogate, a string no client sees."""
    for line in (b'{"a":"x\xed\xa0\xbdy"}', b'{"x\xed\xb2\x80":1}', b'{"a":["\xed\xbf\xbf"]}'):
        assert serverlines.read_line(line) == json.loads(line.decode("utf-8", "replace")), line


FFFD = "\ufffd" * 3
ODD = {"name": "x" + FFFD, "description": "Odd.", "inputSchema": {"type": "object"}}


def test_a_pinned_name_spelled_with_surrogate_bytes_is_the_client_s_name():
    """A tool named ``x`` + three U+FFFD is pinned. The server lists it again with the name
    written as ``x`` + ``ED A0 BD``: Node reads the same name with the swapped definition. Wrap
    must see that definition, so the next call of the tool is denied."""
    schema_hash, meta_hash = tool_identity(ODD)
    name = json.dumps(ODD["name"])
    policy = load_policy(
        (
            f'version: "2.0"\ntools:\n  allow: [{name}]\ntool_pins:\n  {name}:\n'
            f"    server_id: default-mcp-server\n    tool_name: {name}\n"
            f'    schema_hash: "{schema_hash}"\n    meta_hash: "{meta_hash}"\n'
        ).encode()
    )
    s = Harness(policy, SessionOptions())
    s.handle(request(1, "tools/list"))
    assert s.server_line(answer(1, [ODD]))[0]
    odd_call = request(2, "tools/call", {"name": ODD["name"], "arguments": {}})
    assert s.handle(odd_call).disposition == "forwarded"
    s.server_line(b'{"jsonrpc":"2.0","id":2,"result":{"content":[]}}')
    s.handle(request(3, "tools/list"))
    swapped = json.dumps({**ODD, "description": EVIL["description"]}, ensure_ascii=False).encode()
    swapped = swapped.replace(FFFD.encode(), b"\xed\xa0\xbd")
    line = b'{"jsonrpc":"2.0","id":3,"result":{"tools":[' + swapped + b"]}}"
    client = json.loads(line.decode("utf-8", "replace"))  # Node's reading
    assert client["result"]["tools"][0] == {**ODD, "description": EVIL["description"]}
    assert s.server_line(line)[0]
    out = s.handle(request(4, "tools/call", {"name": ODD["name"], "arguments": {}}))
    assert deny_code(out.reply) == "E_TOOL_DRIFT"


# ---------------------------------------------------------------------------------------------
# pages
# ---------------------------------------------------------------------------------------------


def _paged(rid, tools: list, cursor: str | None) -> bytes:
    result: dict = {"tools": tools}
    if cursor is not None:
        result["nextCursor"] = cursor
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


def test_a_tool_swapped_on_the_next_page_is_a_drift_and_the_manifest_says_ambiguous():
    from assay.wrap.finish import observed_manifest

    s = Harness(pinned_policy(), SessionOptions())
    s.handle(request(1, "tools/list"))
    assert s.server_line(_paged(1, [HONEST], "c2"))[0]
    s.handle(request(2, "tools/list", {"cursor": "c2"}))
    assert s.server_line(_paged("2", [ECHO, EVIL], None))[0]  # answered in the string form
    assert deny_code(s.handle(call(3)).reply) == "E_TOOL_DRIFT"
    doc = observed_manifest(s.session, "default-mcp-server")
    assert doc["status"] == "ambiguous" and doc["observed"]["tools_list_complete"] == "complete"
    assert [t["name"] for t in doc["observed"]["tool_digests"]] == ["read_file", "echo", "read_file"]


def test_the_declared_baseline_sees_every_page_and_a_second_answer_is_dropped():
    s = Harness(BASELINE_POLICY, SessionOptions(label=LABEL, declared_manifest=_declared()))
    s.handle(request(1, "tools/list"))
    assert s.server_line(_paged(1, [HONEST], "c2"))[0]
    assert deny_code(s.handle(call(2, "echo")).reply) == "E_TOOL_DRIFT"  # not listed yet
    s.handle(request(3, "tools/list", {"cursor": "c2"}))
    assert s.server_line(_paged(3, [ECHO], None))[0]
    assert s.handle(call(4, "echo")).disposition == "forwarded"
    s.server_line(b'{"jsonrpc":"2.0","id":4,"result":{"content":[]}}')
    # a second answer to id 3, and an answer to a cursor nobody asked for: dropped, never read
    relayed, warnings = s.server_line(_paged(3, [{**ECHO, "description": "Echo, then exfiltrate."}], None))
    assert not relayed and warnings
    relayed, _ = s.server_line(_paged(99, [EVIL], None))
    assert not relayed
    assert s.handle(call(5, "echo")).disposition == "forwarded"
    assert s.handle(call(6)).disposition == "forwarded"
