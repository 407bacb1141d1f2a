"""Client frames through the wrap session, in memory: admission, enforcement, records, session start.

Each test drives a :class:`~assay.session.session.WrapSession` through ``tests/wrap/_harness.py``:
client and server bytes in, effects out, no process. "The frame never reached the server" reads
here as "its bytes are in no ToServer effect"; the shell that turns effects into writes has its
own smoke test in ``tests/wrap/test_relay_frames.py``.

The rules are those of docs/wrap.md: "Client frames" (admission and rejection replies),
"Enforcement" and "Deny replies", "Tool pins", "Logs" (records come before the frame they
describe takes effect) and "One-run outputs and session reports" (when the session starts,
request receipts).
"""

from __future__ import annotations

import msgspec

import functools
import hashlib
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import load_policy, tool_identity
from assay.session.admission import Admitted, admit
from assay.session.effects import CloseServerInput, Record, Sink, StartSession, ToClient, ToServer
from assay.session.records import tool_identity_line
from assay.session.session import SessionOptions

from tests.wrap._harness import Effects, Harness
from tests.wrap.conftest import ALLOWLIST, DENY_EXEC, call, request
from tests.wrap.test_admission import BAD, GOOD

SOURCE = "assay://org/app"
DISCOVER = request("d1", "server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
PING = request(1, "ping")

# The rejection reply of each reason (docs/wrap.md, "Client frames").
REJECT_CODES = {
    "invalid_utf8": (-32700, "Parse error"),
    "embedded_line_break": (-32700, "Parse error"),
    "malformed_json": (-32700, "Parse error"),
    "batch": (-32600, "Invalid Request"),
    "not_an_object": (-32600, "Invalid Request"),
    "duplicate_member": (-32600, "Invalid Request"),
    "non_string_method": (-32600, "Invalid Request"),
    "frame_too_large": (-32600, "Invalid Request"),
}


def rejection(reason: str) -> bytes:
    code, message = REJECT_CODES[reason]
    return b'{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":"%s","data":{"reason":"%s"}}}\n' % (
        code,
        message.encode(),
        reason.encode(),
    )


def _ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"evt_decision_{next(counter):08d}"


@functools.lru_cache(maxsize=None)
def policy_of(text: str) -> Any:
    return load_policy(text.encode())  # a Policy is read-only: sessions can share it


def harness(policy_text: str = ALLOWLIST, **options: Any) -> Harness:
    """A session over ``policy_text`` with deterministic event ids and times."""
    return Harness(
        policy_of(policy_text),
        SessionOptions(**options),
        new_event_id=_ids(),
        now=lambda: "2026-12-01T12:00:00.000000000+00:00",
    )


def logged(policy_text: str = ALLOWLIST, **options: Any) -> Harness:
    """A session that writes decision events to the decision log."""
    return harness(policy_text, event_source=SOURCE, decision_sinks=(Sink.DECISION_LOG,), **options)


def events(effects: Effects) -> list[dict[str, Any]]:
    return [json.loads(line) for line in effects.records(Sink.DECISION_LOG)]


def receipts(effects: Effects) -> list[dict[str, Any]]:
    return [json.loads(line) for line in effects.records(Sink.RECEIPTS)]


def lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def feed(h: Harness, stream: bytes, cuts: list[int] | None = None) -> Effects:
    """Feed ``stream`` cut at ``cuts`` (one read each piece), then the client's EOF."""
    out = Effects()
    points = sorted(set(c for c in (cuts or []) if 0 < c < len(stream)))
    for start, end in zip([0, *points], [*points, len(stream)]):
        out.extend(h.client(stream[start:end]))
    out.extend(h.client_closed())
    return out


def first_index(effects: Effects, kind: type, contains: bytes = b"") -> int:
    """The index of the first effect of ``kind`` whose bytes hold ``contains``."""
    for i, effect in enumerate(effects):
        if isinstance(effect, kind) and contains in getattr(effect, "data", b""):
            return i
    raise AssertionError(f"no {kind.__name__} holding {contains!r} in {effects.kinds()}")


def shape(effects: Any) -> list[tuple[Any, ...]]:
    """Effects as (kind, *fields): effects are named tuples, and ``ToServer(b"x") == ToClient(b"x")``
    (both are ``(b"x",)``), so comparing effects needs their kind too."""
    return [(type(e).__name__, *msgspec.structs.astuple(e)) for e in effects]


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# -- admission (docs/wrap.md, "Client frames") -----------------------------------------------------


@pytest.mark.parametrize("dry_run", [False, True], ids=["enforce", "dry_run"])
@pytest.mark.parametrize("reads", ["one_read", "line_by_line", "byte_by_byte"])
def test_every_bad_frame_is_rejected_locally_and_never_forwarded(dry_run, reads):
    """One reply and one warning per bad frame, in order; the server gets only the good frames,
    byte for byte with CRLF kept; a blank line gets nothing; no content is echoed."""
    good = [
        request(1, "initialize", {"protocolVersion": "2025-06-18"}),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\r\n',
    ]
    stream = good[0] + b"".join(line for line, _ in BAD) + b"\n  \t\r\n" + good[1]
    cuts = {
        "one_read": [],
        "line_by_line": list(itertools.accumulate(len(ln) for ln in lines(stream))),
        "byte_by_byte": list(range(len(stream))),
    }[reads]
    h = harness(dry_run=dry_run)
    effects = feed(h, stream, cuts)
    assert effects.to_server == b"".join(good)
    assert effects.to_client == b"".join(rejection(reason) for _, reason in BAD)
    assert effects.warnings == [f"[assay] WARNING: rejected client frame ({reason})" for _, reason in BAD]
    assert not any("NaN" in w or "\\ud800" in w for w in effects.warnings)  # never echoed
    assert h.counts == {"forwarded": 2, "blocked": 0, "rejected": len(BAD), "dropped": 0}


@pytest.mark.parametrize("piece", [0, 7, 64], ids=["one_read", "7_bytes", "64_bytes"])
def test_frame_too_large(piece):
    """Frames over max_frame_bytes are rejected (-32600, frame_too_large); exactly the limit
    passes, with a CRLF terminator too, and a long frame cut across reads is still judged whole."""
    exact = b'{"pad":"' + b"a" * (100 - 10) + b'"}'
    assert len(exact) == 100
    over = b'{"pad":"' + b"a" * (101 - 10) + b'"}'
    stream = exact + b"\n" + over + b"\n" + exact + b"\r\n"
    h = harness(max_frame_bytes=100)
    effects = feed(h, stream, list(range(0, len(stream), piece)) if piece else [])
    assert effects.to_server == exact + b"\n" + exact + b"\r\n"
    assert effects.to_client == rejection("frame_too_large")
    assert effects.warnings == ["[assay] WARNING: rejected client frame (frame_too_large)"]


def test_admitted_frames_go_to_the_server_byte_for_byte():
    """Every admitted spelling reaches the server unchanged, whether the frames come in one read
    or one at a time; the last line without its terminator goes out at the client's EOF."""
    stream = b"".join(GOOD)
    assert not stream.endswith(b"\n")
    for cuts in ([], list(itertools.accumulate(len(g) for g in GOOD))):
        effects = feed(harness(), stream, cuts)
        assert effects.to_server == stream
        assert effects.to_client == b"" and effects.warnings == []


FRAME = st.one_of(
    st.sampled_from([line for line, _ in BAD]),
    st.sampled_from([g if g.endswith(b"\n") else g + b"\n" for g in GOOD]),
    st.sampled_from([b"\n", b" \t\r\n"]),
    st.builds(lambda i: call(i, "exec", {}), st.integers(0, 9)),  # denied by ALLOWLIST
    st.builds(lambda i: call(i, "echo", {"x": i}), st.integers(0, 9)),  # allowed
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4).map(
        lambda d: json.dumps({k: v for k, v in d.items() if k != "method"}).encode() + b"\n"
    ),
)


@settings(max_examples=100, deadline=None)
@given(frames=st.lists(FRAME, max_size=16), cuts=st.lists(st.integers(0, 4096), max_size=12))
def test_generated_streams_forward_exactly_the_admitted_frames(frames, cuts):
    """Whole client streams cut at random points: the server gets exactly the admitted frames
    that are not denied, in order; each rejected frame gets its rejection reply and each denied
    call its deny reply, in order."""
    stream = b"".join(frames)
    effects = feed(harness(), stream, [c % (len(stream) + 1) for c in cuts])
    verdicts = [admit(f) for f in frames]
    denied = [
        isinstance(v, Admitted) and v.frame.get("method") == "tools/call" and v.frame["params"]["name"] == "exec"
        for v in verdicts
    ]
    expected = b"".join(f for f, v, d in zip(frames, verdicts, denied) if isinstance(v, Admitted) and not d)
    assert effects.to_server == expected
    replies = lines(effects.to_client)
    expected_replies = [
        rejection(v.reason) if not isinstance(v, Admitted) else v.frame["id"]
        for v, d in zip(verdicts, denied)
        if v is not None and (not isinstance(v, Admitted) or d)
    ]
    assert len(replies) == len(expected_replies)
    for got, want in zip(replies, expected_replies):
        if isinstance(want, bytes):
            assert got == want
        else:
            reply = json.loads(got)
            assert reply["id"] == want and reply["result"]["isError"] is True


# Pieces of JSON that one reader or another gets wrong: numbers that overflow a double, lone
# surrogates, escapes that spell a colon, raw control characters, invalid UTF-8, spellings JSON
# forbids, repeated member names (also spelled with escapes).
TRICKY_VALUES = [
    b"1e400",
    b"-1e400",
    b"1e308",
    b"2e308",
    b"NaN",
    b"Infinity",
    b"-0",
    b"0.5",
    b"1E+2",
    b"9" * 310,
    b"123456789012345678901234567890",
    b'"\\ud800"',
    b'"\\udc00x"',
    b'"\\ud83d\\ude00"',
    b'"\\u003a"',
    b'"\\u003A"',
    b'":"',
    b'"\\""',
    b'"\x01"',
    b'"\xc3\xa9"',
    b'"\xc3"',
    b'"\xed\xa0\x80"',
    b'"\\u0000"',
    b"true",
    b"null",
    b"[]",
    b"{}",
    b'"\t"',
    b'"\x7f"',
    b"01",
    b"1.",
    b".1",
    b"+1",
    b'"\\x"',
    b"1e",
    b'"\xef\xbb\xbf"',
    b'"\xf0\x9f\x98\x80"',
    b'"\xf8\x88\x80\x80\x80"',
]
TRICKY_KEYS = [
    b'"a"',
    b'"b"',
    b'"method"',
    b'"id"',
    b'"\\u0061"',
    b'""',
    b'":"',
    b'"\\ud800"',
    b'"\xc3\xa9"',
    b'"a\\u003a"',
]
SPACE = st.sampled_from([b"", b"", b" ", b"\t", b"\x0c", b"\xc2\xa0"])


def _joined(open_: bytes, close: bytes, items: Any) -> Any:
    return items.map(lambda parts: open_ + b",".join(parts) + close)


PLAIN_VALUES = [b"1", b"-2.5e3", b'"x"', b'"a:b"', b"false", b'"\\u00e9\\n"', b'"\\ud83d\\ude00"']
TRICKY_JSON = st.recursive(
    st.sampled_from(PLAIN_VALUES)
    | st.sampled_from(PLAIN_VALUES)
    | st.sampled_from(PLAIN_VALUES)
    | st.sampled_from(TRICKY_VALUES),
    lambda inner: (
        _joined(b"[", b"]", st.lists(inner, max_size=3))
        | _joined(
            b"{",
            b"}",
            st.lists(
                st.tuples(SPACE, st.sampled_from(TRICKY_KEYS), SPACE, inner).map(
                    lambda t: t[0] + t[1] + t[2] + b":" + t[3]
                ),
                max_size=3,
            ),
        )
    ),
    max_leaves=8,
)
TRICKY_LINE = _joined(
    b"{",
    b"}\n",
    st.lists(st.tuples(st.sampled_from(TRICKY_KEYS), TRICKY_JSON).map(lambda t: t[0] + b":" + t[1]), max_size=4),
)


def fast_and_careful(frames: list[bytes]) -> None:
    """The effects of ``frames`` after the session started, in one read and one read per line,
    are exactly what :func:`admit` says of each line."""
    verdicts = [admit(f) for f in frames]
    admitted = b"".join(f for f, v in zip(frames, verdicts) if isinstance(v, Admitted))
    replies = b"".join(rejection(v.reason) for v in verdicts if v is not None and not isinstance(v, Admitted))
    for reads in ([b"".join(frames)], frames):
        h = harness()
        h.client(PING)  # the session starts: the next reads may take the fast path
        effects = Effects(e for data in reads for e in h.client(data))
        assert effects.to_server == admitted
        assert effects.to_client == replies


@pytest.mark.parametrize("value", TRICKY_VALUES + PLAIN_VALUES)
def test_each_tricky_value_is_judged_as_admit_judges_it(value):
    """Each value alone, nested, and next to a clean frame: the same verdict either way."""
    frames = [b'{"a":%s}\n' % value, b'{"a":[%s]}\n' % value, b'{"a":{"b":%s}}\n' % value]
    for frame in frames:
        fast_and_careful([frame])
        fast_and_careful([PING, frame, PING])


@pytest.mark.parametrize("first,second", list(itertools.product(TRICKY_KEYS, repeat=2)))
def test_each_pair_of_member_names_is_judged_as_admit_judges_it(first, second):
    """Two members, each name spelled one of several ways (escapes included): a repeated name is
    rejected however it is spelled, at the top and nested."""
    fast_and_careful([b"{%s:1,%s:2}\n" % (first, second)])
    fast_and_careful([b'{"p":{%s:1,%s:{}}}\n' % (first, second)])


@settings(max_examples=80, deadline=None)
@given(st.lists(TRICKY_LINE, min_size=1, max_size=6))
def test_a_read_of_tricky_frames_forwards_exactly_what_admit_admits(frames):
    """Once the session has started, a read of whole lines is judged the fast way when it can
    be; whatever way it takes, the server gets exactly the lines :func:`admit` admits and each
    other line gets its own rejection reply, in order (docs/wrap.md, "Client frames")."""
    fast_and_careful(frames)


# -- enforcement and deny replies (docs/wrap.md, "Enforcement", "Deny replies") ---------------------


def test_deny_reply_bytes_and_not_forwarded():
    """The deny reply's exact bytes, its id echoed unchanged; the denied frames never reach the
    server and the allowed one does."""
    h = harness(DENY_EXEC)
    effects = h.client(call(7, "exec", {}) + call("s-1", "exec") + call(8, "search", {"q": 1}))
    replies = lines(effects.to_client)
    assert replies[0] == (
        b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Content blocked by policy"},'
        b'{"type":"text","text":"{\\"status\\":\\"deny\\",\\"error_code\\":\\"E_TOOL_DENIED\\",\\"tool\\":\\"exec\\",'
        b'\\"reason\\":\\"Tool is explicitly denylisted by name\\"}"}],'
        b'"isError":true,"structuredContent":{"status":"deny","error_code":"E_TOOL_DENIED","tool":"exec",'
        b'"reason":"Tool is explicitly denylisted by name"}}}\n'
    )
    assert replies[1] == replies[0].replace(b'"id":7', b'"id":"s-1"')
    assert len(replies) == 2
    assert effects.to_server == call(8, "search", {"q": 1})
    assert h.counts == {"forwarded": 1, "blocked": 2, "rejected": 0, "dropped": 0}


def test_schema_deny_reply_bytes():
    """An E_ARG_SCHEMA deny carries the violations, in content and structuredContent alike."""
    h = harness()
    effects = h.client(call(7, "read_file", {"path": "/etc/passwd"}))
    payload = (
        b'{"status":"deny","error_code":"E_ARG_SCHEMA","tool":"read_file",'
        b'"violations":[{"path":"/path","message":"\\"/etc/passwd\\" does not match \\"^/workspace/\\""}]}'
    )
    assert effects.to_client == (
        b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Content blocked by policy"},'
        b'{"type":"text","text":' + json.dumps(payload.decode()).encode() + b"}],"
        b'"isError":true,"structuredContent":' + payload + b"}}\n"
    )
    assert effects.to_server == b""


def test_only_tools_call_is_evaluated():
    """initialize, tools/list, ping, server/discover and notifications pass under an allowlist
    that names none of them, with no decision event (the initialize gets its client event:
    docs/wrap-records.md, "The client")."""
    frames = (
        request(1, "initialize", {})
        + request(2, "tools/list")
        + request(3, "ping")
        + request(4, "server/discover", {"_meta": {}})
        + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    )
    for cuts in ([], list(itertools.accumulate(len(ln) for ln in lines(frames)))):
        h = logged()
        effects = feed(h, frames, cuts)
        assert effects.to_server == frames
        assert effects.to_client == b""
        kinds = [json.loads(r)["type"] for r in effects.records(Sink.DECISION_LOG)]
        assert kinds == ["assay.client.capabilities"]


def test_denied_notification_is_dropped_without_reply():
    """A denied tools/call without an id gets no reply and is not forwarded; it is logged."""
    h = logged()
    effects = h.client(b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"exec"}}\n')
    assert effects.to_client == b"" and effects.to_server == b""
    [event] = events(effects)
    assert event["data"]["decision"] == "deny" and "request_id" not in event["data"]
    assert h.counts["dropped"] == 1 and h.counts["blocked"] == 0


def test_dry_run_forwards_and_logs():
    """Dry run forwards the call the policy denies; its event says allow and keeps the policy's
    reason code and typed decision; the audit record says would_deny."""
    frames = call(1, "exec", {}) + call(2, "read_file", {"path": "/workspace/a"})
    h = logged(dry_run=True, audit=True)
    effects = h.client(frames)
    assert effects.to_server == frames
    assert effects.to_client == b""
    got = events(effects)
    assert [e["data"]["decision"] for e in got] == ["allow", "allow"]
    assert got[0]["data"]["reason_code"] == "P_TOOL_DENIED"
    assert got[0]["data"]["typed_decision"] == "deny"
    assert got[1]["data"]["reason_code"] == "P_POLICY_ALLOW"
    audit = [json.loads(line) for line in effects.records(Sink.AUDIT_LOG)]
    assert [a["decision"] for a in audit] == ["would_deny", "allow"]
    assert audit[0]["agentic"]["error_code"] == "E_TOOL_DENIED"


def test_modern_deny_reply_carries_result_type():
    """A request of the 2026-07-28 protocol era gets "resultType":"complete" as the last member
    of the result."""
    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    frame = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "exec", **meta}}).encode()
    effects = harness(DENY_EXEC).client(frame + b"\n")
    assert effects.to_client.endswith(b'"reason":"Tool is explicitly denylisted by name"},"resultType":"complete"}}\n')
    assert effects.to_server == b""
    legacy = harness(DENY_EXEC).client(call(5, "exec"))
    assert b"resultType" not in legacy.to_client


def test_client_responses_are_relayed_without_evaluation():
    frame = b'{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}\n'
    h = logged()
    effects = h.client(frame)
    assert effects.to_server == frame
    assert effects.to_client == b""
    assert effects.records(Sink.DECISION_LOG) == []


def test_rate_limit_counts_every_request():
    """max_requests_total counts every client request; the next tools/call is denied; non-tool
    requests are never blocked."""
    h = harness('version: "2.0"\nlimits:\n  max_requests_total: 2\n')
    effects = h.client(request(1, "initialize", {}) + request(2, "ping") + call(3, "anything", {}) + request(4, "ping"))
    [reply] = [json.loads(line) for line in lines(effects.to_client)]
    assert reply["id"] == 3
    assert reply["result"]["structuredContent"] == {"status": "deny", "error_code": "E_RATE_LIMIT"}
    assert effects.to_server == request(1, "initialize", {}) + request(2, "ping") + request(4, "ping")


def test_rate_limit_counts_requests_not_notifications_or_responses():
    """Only frames with a string method and an id are requests: notifications and client
    responses do not use up max_requests_total."""
    h = harness('version: "2.0"\nlimits:\n  max_requests_total: 2\n')
    quiet = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n' + b'{"jsonrpc":"2.0","id":"s1","result":{}}\n'
    effects = h.client(quiet * 3 + request(1, "ping") + call(2, "anything", {}) + quiet + call(3, "anything", {}))
    assert effects.to_server == quiet * 3 + request(1, "ping") + call(2, "anything", {}) + quiet
    [reply] = [json.loads(line) for line in lines(effects.to_client)]
    assert reply["id"] == 3 and reply["result"]["structuredContent"]["error_code"] == "E_RATE_LIMIT"


# -- records (docs/wrap.md, "Logs") ---------------------------------------------------------------


def test_decision_log_event_shape():
    """CloudEvents envelope in its key order, the reason-code mapping, tool_call_id and
    request_id of each evaluated call."""
    h = logged()
    effects = h.client(call(7, "exec", {}) + call(8, "read_file", {"path": "/workspace/x"}) + call(9, "write_file", {}))
    got = events(effects)
    assert [list(e) for e in got] == [["specversion", "id", "type", "source", "time", "data"]] * 3
    assert all(e["type"] == "assay.tool.decision" and e["source"] == SOURCE for e in got)
    assert [e["id"] for e in got] == ["evt_decision_00000001", "evt_decision_00000002", "evt_decision_00000003"]
    assert [
        (
            e["data"]["tool"],
            e["data"]["decision"],
            e["data"]["reason_code"],
            e["data"]["tool_call_id"],
            e["data"]["request_id"],
        )
        for e in got
    ] == [
        ("exec", "deny", "P_TOOL_DENIED", "req_7", 7),
        ("read_file", "allow", "P_POLICY_ALLOW", "req_8", 8),
        ("write_file", "deny", "P_TOOL_NOT_ALLOWED", "req_9", 9),
    ]


@pytest.mark.parametrize("reads", ["one_read", "line_by_line"])
def test_each_record_comes_before_its_frame_takes_effect(reads):
    """A call's decision event and audit record precede the ToServer that carries the call, or
    the ToClient of its deny reply. The shell writes all records of one list before any of its
    bytes (docs/wrap.md, "Records are whole"), so a record that cannot be written stops every
    frame of its read, and none takes effect before its record is written."""
    frames = [
        call(7, "exec", {}),
        call(8, "read_file", {"path": "/workspace/x"}),
        call(9, "echo", {}),
        call(10, "write_file", {}),
        call(11, "echo", {"a": 1}),
    ]
    stream = b"".join(frames)
    h = logged(audit=True)
    effects = feed(h, stream, list(itertools.accumulate(map(len, frames))) if reads == "line_by_line" else [])
    records = [i for i, e in enumerate(effects) if isinstance(e, Record)]
    assert [effects[i].sink for i in records] == [Sink.DECISION_LOG, Sink.AUDIT_LOG] * 5
    for n, frame in enumerate(frames):
        rid = json.loads(frame)["id"]
        event, audit = records[2 * n], records[2 * n + 1]
        assert json.loads(effects[event].data)["data"]["request_id"] == rid
        if rid in (7, 10):
            done = first_index(effects, ToClient, b'"id":%d,' % rid)
        else:
            done = first_index(effects, ToServer, frame)
        assert event < audit < done, effects.kinds()
    assert effects.to_server == frames[1] + frames[2] + frames[4]


def test_verbose_lines():
    """--verbose: one TOOL line per tool a tools/list answer shows, an ALLOW or DENY line per
    evaluated call (an unreadable call is denied as the tool "")."""
    tool = {"name": "read_file", "description": "Read a file", "inputSchema": {"type": "object"}}
    h = harness(verbose=True)
    assert h.client(request(1, "tools/list")).to_server == request(1, "tools/list")
    answer = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool]}}).encode()
    relayed, warnings = h.server_line(answer)
    assert relayed
    assert warnings == [tool_identity_line("read_file", "default-mcp-server", *tool_identity(tool))]
    assert warnings[0].startswith('[assay] TOOL "read_file" server_id="default-mcp-server" schema_hash=')
    effects = h.client(
        call(2, "read_file", {"path": "/workspace/a"})
        + call(3, "exec", {})
        + b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"bad":1}}\n'
    )
    assert effects.warnings == [
        '[assay] ALLOW "read_file"',
        '[assay] DENY "exec" (reason: "Tool is explicitly denylisted by name")',
        '[assay] DENY "" (reason: "Tool is not in the allowlist")',
    ]


# -- tool pins (docs/wrap.md, "Tool pins") --------------------------------------------------------


def pinned(tool: dict[str, Any], meta_hash: str | None = None) -> str:
    schema_hash, real_meta = tool_identity(tool)
    return (
        'version: "2.0"\ntools:\n  allow: ["echo"]\nschemas:\n  echo: {type: object}\ntool_pins:\n'
        "  echo:\n    server_id: default-mcp-server\n    tool_name: echo\n"
        f'    schema_hash: "{schema_hash}"\n    meta_hash: "{meta_hash or real_meta}"\n'
    )


def drift_payload(effects: Effects) -> dict[str, Any]:
    """The deny payload of the one reply, as the model reads it (the second content item)."""
    [reply] = [json.loads(line) for line in lines(effects.to_client)]
    return json.loads(reply["result"]["content"][1]["text"])


def test_tool_pins_drift_from_tools_list():
    """A pinned tool is denied until a tools/list answer lists it, and when its listed identity
    differs from the pin; denied calls are not forwarded; the answer reaches the client byte
    for byte."""
    tool = {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"}}
    h = logged(pinned(tool, meta_hash="0" * 64))
    first = h.client(call(1, "echo", {}))
    assert drift_payload(first)["error_code"] == "E_TOOL_DRIFT"
    assert "has not been seen" in events(first)[0]["data"]["reason"]
    listing = h.client(request(2, "tools/list"))
    assert listing.to_server == request(2, "tools/list")
    answer = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"tools": [tool]}}).encode()
    served = h.server(answer + b"\n")
    assert served.to_client == answer + b"\n"  # server lines are never modified
    third = h.client(call(3, "echo", {}))
    assert drift_payload(third)["error_code"] == "E_TOOL_DRIFT"
    assert "identity drifted" in events(third)[0]["data"]["reason"]
    assert first.to_server == third.to_server == b""


@pytest.mark.parametrize("hold", ["held_whole", "streamed"])
def test_tool_pins_checked_after_a_tools_list_longer_than_a_read(hold):
    """A tools/list answer of 1.5 MiB, arriving in 64 KiB reads, reaches the client byte for
    byte and still counts for the pins: read whole, it shows the drift; longer than wrap holds,
    it is relayed as it comes and counts as unreadable. Either way the pinned call is denied, so
    a server cannot dodge its pins by padding its tool list."""
    pin = {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"}}
    padding = [{"name": f"pad{i}", "description": "x" * 1000, "inputSchema": {"type": "object"}} for i in range(1500)]
    tools = padding + [dict(pin, description="Echo, changed")]
    answer = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}).encode() + b"\n"
    assert len(answer) > 3 << 19
    options = {"server_hold_limit": 1 << 20} if hold == "streamed" else {}
    h = logged(pinned(pin), **options)
    h.client(request(1, "tools/list"))
    relayed = Effects()
    for start in range(0, len(answer), 1 << 16):
        relayed.extend(h.server(answer[start : start + (1 << 16)]))
    assert relayed.to_client == answer
    denied = h.client(call(2, "echo", {}))
    assert drift_payload(denied)["error_code"] == "E_TOOL_DRIFT"
    assert denied.to_server == b""
    reason = events(denied)[0]["data"]["reason"]
    assert ("identity drifted" if hold == "held_whole" else "could not be read") in reason, reason
    # after an answer wrap could not read, it cannot know whether the tool declares an
    # outputSchema, so the deny carries no structuredContent (docs/wrap.md, "Deny replies")
    assert ("structuredContent" in json.loads(denied.to_client)["result"]) is (hold == "held_whole")


# -- when the session starts (docs/wrap.md, "One-run outputs and session reports") -----------------


def starts(effects: Effects) -> int:
    return sum(isinstance(e, StartSession) for e in effects)


def test_client_eof_without_any_frame_starts_the_session():
    """A client that closes without sending a line makes a session: StartSession, then the
    server's stdin is closed; no receipt, every count zero."""
    h = harness(receipts=True)
    effects = h.client_closed()
    assert effects.kinds() == ["StartSession", "CloseServerInput"]
    assert h.is_session
    assert h.counts == {"forwarded": 0, "blocked": 0, "rejected": 0, "dropped": 0}


def test_blank_lines_never_start_a_session():
    """Blank lines are not frames: alone they do nothing, and a run of only blank lines is a
    run without a frame (its EOF starts the session); after a discover they change nothing."""
    blanks = b"\n \t\r\n\n"
    h = harness(receipts=True)
    assert h.client(blanks) == []
    assert not h.started
    assert h.client_closed().kinds() == ["StartSession", "CloseServerInput"]

    h = harness(receipts=True)
    effects = feed(h, DISCOVER + blanks)
    assert starts(effects) == 0 and not h.is_session
    assert effects.to_server == DISCOVER
    assert effects.kinds() == ["ToServer", "CloseServerInput"]


@pytest.mark.parametrize("line,reason", [(b"not json\n", "malformed_json"), (b"[1]\n", "batch")])
def test_a_rejected_first_frame_starts_the_session(line, reason):
    """A line that will be rejected starts the session before it is handled, and gets a
    receipt."""
    h = harness(receipts=True)
    effects = h.client(line)
    assert isinstance(effects[0], StartSession) and starts(effects) == 1
    assert effects.to_client == rejection(reason)
    assert receipts(effects) == [
        {
            "schema": "assay.mcp_request_receipt.v0",
            "seq": 1,
            "frame_digest": sha256(line[:-1]),
            "kind": "rejected",
            "disposition": "rejected",
            "reject_reason": reason,
        }
    ]


def test_discover_before_the_session_gets_no_receipt_and_the_next_frame_starts_it():
    """server/discover before the session is forwarded and reaches no one-run output; the next
    frame starts the session just before it is handled (so a start that fails leaves it
    unforwarded) and gets receipt 1."""
    h = harness(receipts=True)
    effects = h.client(DISCOVER + PING)
    # the shell writes receipts after the bytes of their read: only the other effects' order counts
    assert shape(e for e in effects if not isinstance(e, Record)) == [
        ("ToServer", DISCOVER),
        ("StartSession",),
        ("ToServer", PING),
    ]
    [receipt] = receipts(effects)
    assert (receipt["seq"], receipt["method"], receipt["request_id"]) == (1, "ping", 1)
    assert starts(effects) == 1


def test_discover_only_run_is_no_session():
    """Only server/discover then EOF: both are forwarded, nothing starts, nothing is recorded."""
    h = logged(receipts=True, audit=True)
    effects = feed(h, DISCOVER + DISCOVER)
    assert effects.to_server == DISCOVER + DISCOVER
    assert starts(effects) == 0 and not h.is_session
    assert not any(isinstance(e, Record) for e in effects)
    assert isinstance(effects[-1], CloseServerInput)


def test_discover_after_the_session_start_is_an_ordinary_frame():
    h = harness(receipts=True)
    effects = Effects([*h.client(PING), *h.client(DISCOVER)])
    assert starts(effects) == 1
    assert [(r["seq"], r["method"]) for r in receipts(effects)] == [(1, "ping"), (2, "server/discover")]


# -- request receipts (docs/wrap.md, "One-run outputs and session reports") ----------------------


@pytest.mark.parametrize("dry_run", [False, True], ids=["enforce", "dry_run"])
def test_receipts_kind_disposition_and_seq(dry_run):
    """One receipt per client line of the session, in order: kind, method, request id,
    disposition (a call the policy would deny is forwarded in dry run; a denied notification is
    blocked), the decision event's id for evaluated calls; never the arguments."""
    frames = [
        request(1, "tools/list"),
        call(2, "exec", {"secret": "hunter2"}),
        b"[1]\n",
        call(3, "echo", {}),
        b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"exec"}}\n',
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
        b'{"jsonrpc":"2.0","id":"srv-1","result":{}}\n',
    ]
    h = logged(receipts=True, dry_run=dry_run)
    effects = h.client(b"".join(frames))
    got = receipts(effects)
    would = "forwarded" if dry_run else "blocked"
    assert [(r["seq"], r["kind"], r.get("method"), r.get("request_id"), r["disposition"]) for r in got] == [
        (1, "request", "tools/list", 1, "forwarded"),
        (2, "request", "tools/call", 2, would),
        (3, "rejected", None, None, "rejected"),
        (4, "request", "tools/call", 3, "forwarded"),
        (5, "notification", "tools/call", None, would),
        (6, "notification", "notifications/initialized", None, "forwarded"),
        (7, "response", None, "srv-1", "forwarded"),
    ]
    assert [list(r)[:3] for r in got] == [["schema", "seq", "frame_digest"]] * 7
    assert [r["frame_digest"] for r in got] == [sha256(f[:-1]) for f in frames]
    ids = [e["id"] for e in events(effects)]
    assert [r.get("decision_event_id") for r in got] == [None, ids[0], None, ids[1], ids[2], None, None]
    assert got[2]["reject_reason"] == "batch"
    assert not any(b"hunter2" in line for line in effects.records(Sink.RECEIPTS))


# -- long client lines (docs/wrap.md, "Output to the client": lines of 1 MiB or more are admitted
# off the event loop) ------------------------------------------------------------------------------


def big_call(rid: int, name: str = "echo", size: int = 1 << 20) -> bytes:
    return call(rid, name, {"pad": "x" * size})


def test_a_long_first_line_starts_the_session_before_it_is_forwarded():
    """The session takes no client data while a long line is judged; the frames before it are
    forwarded first, the session starts just before the long line is handled, and a client EOF
    that comes meanwhile takes effect after it and the frames behind it."""
    h = harness(receipts=True)
    big = big_call(1)
    first = h.session.receive_client_data(DISCOVER + big + PING)
    assert shape(first) == [("ToServer", DISCOVER), ("AdmitLine", big)]
    with pytest.raises(RuntimeError):
        h.session.receive_client_data(PING)  # the shell never reads while a line is judged
    assert h.session.client_closed() == []  # the EOF waits for the verdict
    rest = Effects(h.session.admitted(admit(big)))
    assert shape(e for e in rest if not isinstance(e, Record)) == [
        ("StartSession",),
        ("ToServer", big + PING),
        ("CloseServerInput",),
    ]
    assert [(r["seq"], r["method"]) for r in receipts(rest)] == [(1, "tools/call"), (2, "ping")]


@pytest.mark.parametrize("started", [False, True])
def test_long_lines_are_judged_like_short_ones(started):
    """A long line gets the verdict of a short one: admitted and allowed, denied, rejected."""
    h = harness()
    if started:
        h.client(PING)
    allowed, denied = big_call(1), big_call(2, "exec")
    duplicate = big_call(3)[:-2] + b',"id":3}\n'
    effects = h.client(allowed + denied + duplicate + request(4, "ping"))
    assert effects.to_server == allowed + request(4, "ping")
    replies = lines(effects.to_client)
    assert json.loads(replies[0])["result"]["structuredContent"]["error_code"] == "E_TOOL_DENIED"
    assert replies[1] == rejection("duplicate_member")
    assert len(replies) == 2


# -- wrap's replies and server lines (docs/wrap.md, "Output to the client") --------------------------


def test_replies_go_out_between_whole_server_lines():
    """A half-written server line is held until its newline: wrap's deny and rejection replies
    go to the client at once, never inside that line."""
    h = harness()
    h.client(request(1, "tools/list"))
    answer = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}\n'
    assert h.server(answer[:20]).to_client == b""
    effects = h.client(call(2, "exec", {}) + b"[1]\n")
    replies = lines(effects.to_client)
    assert json.loads(replies[0])["id"] == 2 and replies[1] == rejection("batch")
    assert h.server(answer[20:]).to_client == answer


def test_replies_wait_for_the_end_of_a_streamed_server_line():
    """A server line longer than wrap holds is streamed through as it comes; wrap's own replies
    wait until that line ends and follow it, in order."""
    h = harness(server_hold_limit=100)
    h.client(request(1, "tools/list"))
    answer = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[' + b'{"name":"t"},' * 20 + b"{}]}}\n"
    head, middle, tail = answer[:150], answer[150:200], answer[200:]
    streamed = h.server(head)
    assert streamed.to_client == head
    effects = h.client(call(2, "exec", {}) + b"[1]\n")
    assert effects.to_client == b""  # held: the client is inside the server's line
    assert h.server(middle).to_client == middle
    done = h.server(tail + b'{"jsonrpc":"2.0","method":"notifications/x"}\n')
    out = lines(done.to_client)
    assert out[0] == tail
    assert json.loads(out[1])["id"] == 2 and out[2] == rejection("batch")
    assert out[3] == b'{"jsonrpc":"2.0","method":"notifications/x"}\n'
    assert len(out) == 4


@pytest.mark.parametrize(
    "reads,body",
    [
        ([b"x" * 50 + b"\n"], b"x" * 50),
        ([b'{"aaaaa":1}\r\n'], b'{"aaaaa":1}'),
        ([b'{"aaaaa":1}\r', b"\n"], b'{"aaaaa":1}'),  # the CRLF cut between reads
        ([b'{"aaaaa":1}', b"\r", b"\n"], b'{"aaaaa":1}'),
        ([b'{"aaaaa":1}\r', b"x\n"], b'{"aaaaa":1}\rx'),  # a CR that was no terminator
        ([b'{"aaaaa":1}\r', b"\r\n"], b'{"aaaaa":1}\r'),
        ([b"y" * 30], b"y" * 30),  # unterminated at EOF
    ],
)
def test_an_over_long_frame_is_receipted_with_the_digest_of_its_line(reads, body):
    """An over-long frame is never held whole, yet its receipt carries the digest of the line
    without its terminator, however the line was cut into reads."""
    h = harness(max_frame_bytes=10, receipts=True)
    h.client(PING)
    effects = Effects(e for data in reads for e in h.client(data))
    effects.extend(h.client_closed())
    [receipt] = receipts(effects)
    assert (receipt["reject_reason"], receipt["frame_digest"]) == ("frame_too_large", sha256(body))
    assert effects.to_client == rejection("frame_too_large")
    assert effects.to_server == b""
