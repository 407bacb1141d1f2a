"""The server's hot path, driven in memory (docs/server.md, "Shared rules" and "Policy path
jail"): every tool parses a policy once per content, an unchanged file is not read again, a
cached call is answered without a worker, the protocol does no I/O, the JSON text is exactly
the standard library's, and the server modules import without cycles."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from assay.server import context as context_module
from assay.server.config import ServerConfig
from assay.server.context import NeedsWorker
from assay.server.jsontext import compact_json, pretty_json
from assay.server.log import Logger
from assay.server.protocol import PendingCall, ServerProtocol
from tests.server._helpers import FIXTURES, call

CHECK = "assay_check_args"


def make(root, level="debug", buffered=False):
    logger = Logger(None, level, buffered=buffered)
    logger.records = []
    return ServerProtocol(str(root), ServerConfig(), logger), logger


def line(name, arguments, i=1):
    return json.dumps(call(i, name, arguments)).encode()


def text_of(out: bytes) -> dict:
    return json.loads(json.loads(out)["result"]["content"][0]["text"])


def events(logger, name):
    return [r["fields"] for r in logger.records if r["fields"]["event"] == name]


def test_check_args_parses_its_policy_once_and_still_warns_every_call(tmp_path):
    """`assay_check_args` used to load the policy on every call; now the parsed and compiled
    policy is cached (one miss, then hits) and its warnings are still logged on every call."""
    (tmp_path / "s.yaml").write_text(FIXTURES["strict_policy.yaml"] + "unknown_top_key: 1\n")
    proto, logger = make(tmp_path)
    args = {"tool": "strict_tool", "arguments": {"code": 1}, "policy": "s.yaml"}
    bad = {"tool": "strict_tool", "arguments": {"code": "x"}, "policy": "s.yaml"}
    outs = [proto.handle_blocking(line(CHECK, a)) for a in (args, bad, args, bad, args)]
    assert [text_of(o)["allowed"] for o in outs] == [True, False, True, False, True]
    assert len(events(logger, "cache_miss")) == 1
    assert len(events(logger, "cache_hit")) == 4
    assert len(events(logger, "policy_warning")) == 5


def test_unchanged_file_is_not_read_again_and_an_edit_is_seen(tmp_path, monkeypatch):
    """Once a read came after the file last changed, the file is still looked up on every call
    but its bytes are not read while device, inode, size and times are unchanged; an edit is
    seen."""
    reads = []
    real = context_module.read_open
    monkeypatch.setattr(context_module, "read_open", lambda fd, limit: reads.append(fd) or real(fd, limit))
    p = tmp_path / "b.yaml"
    p.write_text("blocklist: [t]\n")
    proto, _logger = make(tmp_path)
    proto.ctx.racy_ns = proto.ctx_inline.racy_ns = 0  # trust at once (the server waits a second)
    decide = line("assay_policy_decide", {"tool": "t", "policy": "b.yaml"})
    for _ in range(5):
        assert text_of(proto.handle_blocking(decide))["allowed"] is False
    assert len(reads) <= 2  # the first call, and its worker retry
    before = len(reads)
    p.write_text("blocklist: [other]\n")
    assert text_of(proto.handle_blocking(decide))["allowed"] is True
    assert len(reads) > before
    p.unlink()
    assert text_of(proto.handle_blocking(decide))["error"]["code"] == "E_POLICY_NOT_FOUND"


def test_cached_single_name_sees_every_change_of_its_entry(tmp_path, monkeypatch):
    """A cached policy named by one component is checked with one no-follow stat of its entry
    (no open): a swap for a symlink out of the root, a file renamed over it, a mode change and
    a removal are each seen on the next call, and an unchanged file is neither opened nor read."""
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "out.yaml").write_text("blocklist: [t]\n")  # outside: a leak would allow nothing
    p = root / "b.yaml"
    p.write_text("blocklist: [u]\n")
    opens = []
    real_open = context_module.open_policy
    monkeypatch.setattr(context_module, "open_policy", lambda *a: opens.append(a[1]) or real_open(*a))
    proto, _logger = make(root)
    proto.ctx.racy_ns = proto.ctx_inline.racy_ns = 0
    decide = line("assay_policy_decide", {"tool": "t", "policy": "b.yaml"})

    def outcome():
        got = text_of(proto.handle_blocking(decide))
        return got["allowed"] if "error" not in got else got["error"]["code"]

    assert outcome() is True
    assert outcome() is True
    before = len(opens)
    for _ in range(3):
        assert outcome() is True
    assert len(opens) == before  # unchanged: no open at all
    p.unlink()
    os.symlink(tmp_path / "out.yaml", p)  # same name, now a link out of the root
    assert outcome() == "E_PERMISSION_DENIED"
    p.unlink()
    (root / "new.yaml").write_text("blocklist: [t]\n")
    os.rename(root / "new.yaml", p)  # another file renamed over the name
    assert outcome() is False
    assert outcome() is False
    os.chmod(p, 0)
    if os.geteuid() != 0:  # root reads whatever the mode says
        assert outcome() == "E_POLICY_READ"
    os.chmod(p, 0o644)
    assert outcome() is False
    p.unlink()
    assert outcome() == "E_POLICY_NOT_FOUND"


def test_recently_changed_file_is_read_every_call(tmp_path, monkeypatch):
    """Within a second of a change the times alone are not trusted: two same-size edits in one
    timestamp tick must both be seen, so the bytes are read (and hashed) on every call."""
    p = tmp_path / "b.yaml"
    proto, _logger = make(tmp_path)
    decide = line("assay_policy_decide", {"tool": "t", "policy": "b.yaml"})
    for text, allowed in [("blocklist: [t]\n", False), ("blocklist: [u]\n", True), ("blocklist: [t]\n", False)]:
        p.write_text(text)
        assert text_of(proto.handle_blocking(decide))["allowed"] is allowed


def test_cached_call_is_answered_inline_without_a_worker(tmp_path):
    """The first call needs a worker (it parses); later ones are answered by the inline handler.
    Coverage and explain always use a worker."""
    (tmp_path / "b.yaml").write_text(FIXTURES["blocklist_policy.yaml"])
    (tmp_path / "s.yaml").write_text(FIXTURES["sequence.yaml"])
    proto, _logger = make(tmp_path)
    decide = line("assay_policy_decide", {"tool": "dangerous_tool", "policy": "b.yaml"})
    first = proto.receive(decide)
    assert isinstance(first, PendingCall)
    try:
        first.inline()
        raise AssertionError("a cold call must ask for a worker")
    except NeedsWorker:
        pass
    proto.complete(first, first.work())
    again = proto.receive(decide)
    assert again.inline() == {"allowed": False, "matches": ["Tool 'dangerous_tool' is blocked by policy"]}
    ident = proto.receive(line("assay_server_identity", {}))
    assert ident.inline()["name"] == "assay-mcp-server"
    cov = proto.receive(line("assay_check_coverage", {"policy": "s.yaml", "traces": [{"tools": ["Search"]}]}))
    assert cov.inline is None


def test_protocol_does_no_io_and_returns_its_log_lines(tmp_path):
    """With a buffered logger nothing is written anywhere while frames are handled; the lines
    come back from pending_log, in order, as JSON lines, and only once."""
    (tmp_path / "b.yaml").write_text(FIXTURES["blocklist_policy.yaml"])
    stream = io.BytesIO()
    logger = Logger(stream, "info", buffered=True)
    proto = ServerProtocol(str(tmp_path), ServerConfig(), logger)
    proto.handle_blocking(line("assay_policy_decide", {"tool": "x", "policy": "b.yaml"}))
    proto.handle_blocking(b"{not json")
    assert stream.getvalue() == b""
    lines = proto.pending_log().splitlines()
    names = [json.loads(x)["fields"]["event"] for x in lines]
    assert names == ["assay.usage.metered", "tool_call_start", "tool_call_done", "tool_decision", "json_parse_error"]
    assert proto.pending_log() == b""


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=16,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_json_text_is_exactly_the_standard_librarys(value):
    assert compact_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert pretty_json(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_json_text_exponent_floats_and_odd_numbers():
    for value in [1e-7, 1e22, -0.0, 5e-324, 1.7976931348623157e308, math.inf, math.nan, 2**64, -(2**63) - 1]:
        assert compact_json([value]) == json.dumps([value], separators=(",", ":"), ensure_ascii=False)
        assert pretty_json({"v": value}) == json.dumps({"v": value}, indent=2, ensure_ascii=False)


def test_server_modules_import_without_cycles(tmp_path):
    """The protocol, the tools and the identity tool no longer reach back into the entry point,
    and the leaf modules import nothing of the server."""
    code = (
        "import sys\n"
        "import assay.server.info, assay.server.toolbase\n"
        "leaf = sorted(m for m in sys.modules if m.startswith('assay.server.') and m not in "
        "('assay.server.info', 'assay.server.toolbase'))\n"
        "from assay.server.config import ServerConfig\n"
        "from assay.server.log import Logger\n"
        "from assay.server.protocol import ServerProtocol\n"
        f"p = ServerProtocol({str(tmp_path)!r}, ServerConfig(), Logger(None))\n"
        'p.handle_blocking(b\'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":'
        '{"name":"assay_server_identity"}}\')\n'
        "print(leaf, 'assay.server.main' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] False"


_ARG_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(call_args=st.dictionaries(st.text(max_size=3), _ARG_VALUES, max_size=3), slack=st.integers(-40, 120))
def test_arguments_limit_is_exact_whether_or_not_the_whole_was_measured(tmp_path_factory, call_args, slack):
    """`arguments too large` is said exactly when the compact UTF-8 size of `arguments` exceeds
    the field limit, also when the tool skips its own encoding because the protocol's measure
    of all the call's arguments is already within the limit (floats in exponent form, lone
    surrogates and non-ASCII text included)."""
    root = tmp_path_factory.mktemp("limit")
    (root / "p.yaml").write_text("tools:\n  allow: ['*']\n")
    size = len(json.dumps(call_args, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))
    limit = max(20, size + slack)
    proto = ServerProtocol(str(root), ServerConfig(max_field_bytes=limit), Logger(None, "off", buffered=True))
    got = text_of(proto.handle_blocking(line(CHECK, {"tool": "t", "arguments": call_args, "policy": "p.yaml"})))
    refused = got.get("error", {}).get("message") == "arguments too large"
    assert refused == (size > limit), (size, limit, got)


def test_policy_path_memo_keeps_refusals_and_sees_edits(tmp_path):
    """Normalised paths are remembered per policy string: a refused string is refused on every
    call, and two spellings of one file both see an edit."""
    (tmp_path / "b.yaml").write_text("blocklist: [t]\n")
    proto, _logger = make(tmp_path)
    for _ in range(2):
        out = text_of(proto.handle_blocking(line("assay_policy_decide", {"tool": "t", "policy": "../b.yaml"})))
        assert out["error"]["code"] == "E_PERMISSION_DENIED"
    for spelling in ("b.yaml", "./b.yaml", "x/../b.yaml"):
        assert (
            text_of(proto.handle_blocking(line("assay_policy_decide", {"tool": "t", "policy": spelling})))["allowed"]
            is False
        )
    (tmp_path / "b.yaml").write_text("blocklist: [other_tool]\n")
    for spelling in ("b.yaml", "./b.yaml", "x/../b.yaml"):
        assert (
            text_of(proto.handle_blocking(line("assay_policy_decide", {"tool": "t", "policy": spelling})))["allowed"]
            is True
        )
