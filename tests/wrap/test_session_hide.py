"""`--hide-denied-tools` in the session, in memory (docs/wrap.md, "Hiding denied tools").

Server lines go in as bytes; what the client receives comes out. An answer from which a tool
is removed must be the same bytes with exactly those array entries cut out; every other line
must be relayed byte for byte; pins, the declared baseline and the observed manifest must still
see every tool.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from assay.policy import load_policy
from assay.policy.engine import identity_bytes
from assay.session import listing, serverlines
from assay.session.listing import denied_by_name, hide_tools
from assay.session.session import SessionOptions

from tests.docs_examples import policy_example
from tests.wrap._harness import Harness
from tests.wrap.test_session_baseline import LABEL, observe, request

POLICY = load_policy(b'version: "2.0"\ntools:\n  allow: ["read_*", "list_dir", "exec"]\n  deny: ["exec", "*delete*"]\n')
CLASSES = load_policy(b'version: "2.0"\ntool_classes:\n  run_shell: [shell]\ntools:\n  deny_classes: [shell]\n')


def tool(name: str, **extra) -> dict:
    return {"name": name, "description": f"The {name} tool.", "inputSchema": {"type": "object"}, **extra}


READ, LIST, EXEC, WRITE, DELETE = (tool(n) for n in ("read_file", "list_dir", "exec", "write_file", "delete_all"))


def answer(rid, tools: list, **extra) -> bytes:
    """Compact: the array's separators are what a cut writes, so the expected bytes are exact."""
    obj = {"jsonrpc": "2.0", "id": rid, "result": {"tools": tools, **extra}}
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def session(policy=POLICY, **options) -> Harness:
    options.setdefault("hide_denied_tools", True)
    return Harness(policy, SessionOptions(label=LABEL, **options))


def client_sees(s: Harness, rid, line: bytes) -> bytes:
    """The bytes the client receives for one tools/list answer (without the LF)."""
    s.handle(request(rid, "tools/list"))
    got = s.server(line + b"\n").to_client
    assert got.endswith(b"\n") and got.count(b"\n") == 1, got
    return got[:-1]


def names(line: bytes) -> list[str]:
    return [t["name"] for t in serverlines.read_line(line)["result"]["tools"]]


def deny_code(s: Harness, rid, name: str) -> str | None:
    out = s.handle(request(rid, "tools/call", {"name": name, "arguments": {}}))
    if out.disposition == "forwarded":
        return None
    return json.loads(json.loads(out.reply)["result"]["content"][1]["text"])["error_code"]


def test_off_by_default_the_answer_is_relayed_byte_for_byte():
    line = answer(1, [READ, EXEC, WRITE])
    assert client_sees(session(hide_denied_tools=False), 1, line) == line


def test_denied_by_name_and_not_allowed_are_hidden_and_still_denied():
    s = session()
    line = answer(1, [READ, EXEC, WRITE, LIST, DELETE], nextCursor=None)
    seen = client_sees(s, 1, line)
    assert names(seen) == ["read_file", "list_dir"]
    assert seen == answer(1, [READ, LIST], nextCursor=None)
    # pins and the observed manifest saw the whole list
    assert [t["name"] for t in s.last_chain.tools] == ["read_file", "exec", "write_file", "list_dir", "delete_all"]
    assert s.state.identity("exec") is not None
    assert deny_code(s, 2, "exec") == "E_TOOL_DENIED"
    assert deny_code(s, 3, "write_file") == "E_TOOL_NOT_ALLOWED"
    assert deny_code(s, 4, "read_file") is None


def test_the_docs_example_offers_only_what_it_allows():
    s = session(load_policy(policy_example("hidden-tools").encode()))
    listed = [tool(n) for n in ("read_file", "exec", "wipe_disk", "write_file", "search_web", "list_dir")]
    seen = client_sees(s, 1, answer(1, listed))
    assert names(seen) == ["read_file", "search_web", "list_dir"]
    assert [deny_code(s, rid, n) for rid, n in enumerate(("exec", "wipe_disk", "write_file", "search_web"), 2)] == [
        "E_TOOL_DENIED",
        "E_TOOL_DENIED",
        "E_TOOL_NOT_ALLOWED",
        None,
    ]


def test_denied_by_class_is_hidden():
    seen = client_sees(session(CLASSES), 1, answer(1, [tool("run_shell"), READ]))
    assert names(seen) == ["read_file"]


def test_an_answer_with_nothing_to_hide_is_relayed_byte_for_byte():
    line = b'{"id":1, "jsonrpc":"2.0","result":{"tools":[ {"name":"read_file","inputSchema":{"type":"object"},"x":1.10} ]}}'
    assert client_sees(session(), 1, line) == line


def test_schema_and_unconstrained_denies_are_not_hidden():
    """Only the name-only denies: a schema or unconstrained mode `deny` depends on more."""
    policy = load_policy(
        b'version: "2.0"\nenforcement:\n  unconstrained_tools: deny\n'
        b"tools:\n  deny: [exec]\nschemas:\n  read_file: {type: object, required: [path]}\n"
    )
    assert denied_by_name(policy, "exec") and not denied_by_name(policy, "list_dir")
    seen = client_sees(session(policy), 1, answer(1, [READ, LIST, EXEC]))
    assert names(seen) == ["read_file", "list_dir"]


def test_everything_else_keeps_its_exact_bytes():
    line = (
        b'{"jsonrpc":"2.0","result":{"_meta":{"n":123456789012345678901234567890,"f":1.10,"e":1e400,'
        b'"s":"\\ud83d","u":"\xc3\xbc\\u00fc"},"tools":[ {"name":"exec","inputSchema":{}} ,\t'
        b'{"name":"read_file","inputSchema":{"type":"object"},"big":-0.0,"t":"\\ud800x"} , '
        b'{"name":"delete_all","inputSchema":{}}],"nextCursor":"c\\u0000"},"id":1}'
    )
    seen = client_sees(session(), 1, line)
    assert seen == (
        b'{"jsonrpc":"2.0","result":{"_meta":{"n":123456789012345678901234567890,"f":1.10,"e":1e400,'
        b'"s":"\\ud83d","u":"\xc3\xbc\\u00fc"},"tools":['
        b'{"name":"read_file","inputSchema":{"type":"object"},"big":-0.0,"t":"\\ud800x"}'
        b'],"nextCursor":"c\\u0000"},"id":1}'
    )


def test_escaped_member_names_and_the_last_of_two_members_are_what_clients_read():
    line = (
        b'{"jsonrpc":"2.0","id":1,"r\\u0065sult":{"tools":[{"name":"exec","inputSchema":{}}],'
        b'"t\\u006fols":[{"name":"read_file","inputSchema":{}},{"name":"\\u0065xec","inputSchema":{}}]}}'
    )
    seen = client_sees(session(), 1, line)
    assert seen == (
        b'{"jsonrpc":"2.0","id":1,"r\\u0065sult":{"tools":[{"name":"exec","inputSchema":{}}],'
        b'"t\\u006fols":[{"name":"read_file","inputSchema":{}}]}}'
    )
    assert names(seen) == ["read_file"]


def test_every_tool_hidden_leaves_an_empty_list():
    assert client_sees(session(), 1, answer(1, [EXEC, WRITE])) == answer(1, [])


def test_invalid_utf8_is_relayed_unchanged_and_calls_still_denied():
    line = answer(1, [READ, tool("exec", description="XX")]).replace(b"XX", b"\xff")
    s = session()
    assert client_sees(s, 1, line) == line
    assert deny_code(s, 2, "exec") == "E_TOOL_DENIED"


def test_a_line_too_deep_to_read_is_relayed_unchanged():
    deep = b"[" * 300_000 + b"]" * 300_000
    line = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"exec","inputSchema":{}}],"x":' + deep + b"}}"
    assert client_sees(session(), 1, line) == line


def test_deep_but_readable_lines_are_cut():
    deep = b"[" * 5_000 + b"]" * 5_000  # deeper than msgspec and json read: the iterative reader's case
    line = (
        b'{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"exec","inputSchema":{}},{"name":"read_file","inputSchema":{},"d":'
        + deep
        + b"}]}}"
    )
    seen = client_sees(session(), 1, line)
    assert (
        seen == b'{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read_file","inputSchema":{},"d":' + deep + b"}]}}"
    )


def test_a_line_over_the_scan_budget_is_relayed_unchanged(monkeypatch):
    """Readable (under the reader's budget) but too much for the slow scan: never a stall."""
    wide = "[" * 2_000 + "[]," * 120_000 + "[]" + "]" * 2_000
    line = (
        '{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"exec","inputSchema":{}},'
        '{"name":"read_file","inputSchema":{},"d":' + wide + "}]}}"
    ).encode()
    s = session()
    assert client_sees(s, 1, line) == line
    assert deny_code(s, 2, "exec") == "E_TOOL_DENIED"
    monkeypatch.setattr(listing, "SCAN_BUDGET", 10**7)  # the budget, nothing else, kept it
    assert names(client_sees(session(), 1, line)) == ["read_file"]


def test_dry_run_hides_nothing():
    line = answer(1, [READ, EXEC])
    assert client_sees(session(dry_run=True), 1, line) == line


def test_other_lines_of_the_same_read_stay_in_place():
    s = session()
    s.handle(request(1, "tools/list"))
    s.handle(request(2, "ping"))
    note = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}'
    forged = b'{"jsonrpc":"2.0","id":99,"result":{}}'
    pong = b'{"jsonrpc":"2.0","id":2,"result":{}}'
    data = b"\n".join([note, answer(1, [EXEC, READ]), forged, pong]) + b"\n"
    got = s.server(data).to_client
    assert got == b"\n".join([note, answer(1, [READ]), pong]) + b"\n"


def test_a_response_that_answers_no_tools_list_is_never_cut():
    s = session()
    s.handle(request(1, "resources/list"))
    s.handle(request(2, "tools/list"))
    line = answer(1, [EXEC])
    assert s.server(line + b"\n").to_client == line + b"\n"


def test_with_a_declared_manifest_undeclared_tools_are_hidden_drifted_ones_not():
    declared = observe([READ, LIST, EXEC])
    s = session(declared_manifest=declared)
    changed = {**LIST, "description": "changed"}
    seen = client_sees(s, 1, answer(1, [READ, changed, EXEC, tool("read_more")]))
    assert names(seen) == ["read_file", "list_dir"]  # exec: denied by name; read_more: undeclared
    assert deny_code(s, 2, "list_dir") == "E_TOOL_DRIFT"
    assert deny_code(s, 3, "read_more") == "E_TOOL_UNDECLARED"
    assert deny_code(s, 4, "read_file") is None


# ---------------------------------------------------------------------------------------------
# Property: the client sees the server's line minus the hidden entries, nothing else changed.

_NAMES = ["read_file", "list_dir", "exec", "write_file", "delete_all", "read_\u00fc", "r\u00e9ad"]
_RAW = [  # JSON texts whose exact spelling a re-encoder would lose
    b"123456789012345678901234567890",
    b"-0.0",
    b"1.10",
    b"1e400",
    b"1E-7",
    b'"\\ud83d"',
    b'"\\u00fc"',
    '"\u00fc\u2028"'.encode(),
    b'"a\\/b"',
    b"NaN",
    b"Infinity",
    b"[]",
    b"{}",
    b"true",
    b"null",
    b'""',
    b"9" * 5000,  # beyond int(): kept as text by the reader
]
_ws = st.sampled_from([b"", b" ", b"\t", b" \t "])


@st.composite
def _element(draw) -> tuple[bytes, str | None]:
    """One array entry as bytes, and the name a reader gives it."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(_RAW)), None  # an entry that is not a tool object
    name = draw(st.sampled_from(_NAMES))
    ascii_ = draw(st.booleans())
    spelled = json.dumps(name, ensure_ascii=ascii_).encode()
    if name == "exec" and draw(st.booleans()):
        spelled = b'"\\u0065xec"'
    members = [b'"name":' + spelled]
    for key in draw(st.lists(st.sampled_from(["inputSchema", "description", "x", "_meta"]), unique=True)):
        members.append(json.dumps(key).encode() + b":" + draw(_ws) + draw(st.sampled_from(_RAW)))
    order = draw(st.permutations(members))
    return b"{" + b",".join(order) + b"}", name


@st.composite
def _answer(draw) -> tuple[bytes, list[bytes], bytes, bytes]:
    """(line, element bytes, text before the array, text after it)."""
    elements = draw(st.lists(_element(), max_size=6))
    array_ws = [draw(_ws) for _ in range(len(elements) + 1)]
    array = (
        b"["
        + b"".join(
            array_ws[i] + e + draw(_ws) + (b"," if i < len(elements) - 1 else b"") for i, (e, _n) in enumerate(elements)
        )
        + array_ws[-1]
        + b"]"
    )
    extras = [
        json.dumps(k).encode() + b":" + draw(st.sampled_from(_RAW))
        for k in draw(st.lists(st.sampled_from(["nextCursor", "_meta", "z"]), unique=True))
    ]
    at = draw(st.integers(0, len(extras)))
    before = b'{"jsonrpc":"2.0","id":1,"result":{' + b"".join(x + b"," for x in extras[:at]) + b'"tools":' + draw(_ws)
    after = draw(_ws) + b"".join(b"," + x for x in extras[at:]) + b"}}"
    return before + array + after, [e for e, _n in elements], before, after


def _names_of(line: bytes) -> list:
    tools = serverlines.read_line(line)["result"]["tools"]
    return [t.get("name") if isinstance(t, dict) else None for t in tools]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_answer())
@example((answer(1, []), [], b"", b""))
def test_hidden_list_is_the_original_minus_the_denied(generated):
    line, elements, before, after = generated
    s = session()
    seen = client_sees(s, 1, line)
    names_in = _names_of(line)
    denied = [isinstance(n, str) and denied_by_name(POLICY, n) for n in names_in]
    if not any(denied):
        assert seen == line
        return
    kept = [e for e, d in zip(elements, denied, strict=True) if not d]
    assert seen == before + b"[" + b",".join(kept) + b"]" + after
    original, cut = serverlines.read_line(line), serverlines.read_line(seen)
    original["result"]["tools"] = [t for t, d in zip(original["result"]["tools"], denied, strict=True) if not d]
    assert identity_bytes(cut) == identity_bytes(original)  # everything else equal, value for value
    assert len(s.last_chain.tools) <= len(names_in)  # the manifest chain saw the server's list


def test_hide_tools_refuses_a_line_that_does_not_read_back_the_same():
    """The reader and the cut must agree; a reader that sees something else keeps the line."""
    line = answer(1, [EXEC, READ])
    message = json.loads(line)
    assert hide_tools(line, message, lambda n: n == "exec", json.loads) == answer(1, [READ])
    assert hide_tools(line, message, lambda n: n == "exec", lambda b: {"other": 1}) is None
    assert hide_tools(line, message, lambda n: False, json.loads) is None


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"exec"}]}} trailing',
        b'{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"exec"}]',
    ],
)
def test_hide_tools_never_raises_on_odd_layouts(line):
    message = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "exec"}]}}
    got = hide_tools(line, message, lambda n: True, serverlines.read_line)
    assert got is None or serverlines.read_line(got)["result"]["tools"] == []
