"""The sans-IO protocol object and the bounded framer, driven directly (docs/server.md, "Protocol"),
plus property checks: no line, however odd, crashes the server or puts non-JSON on stdout."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.server.config import ServerConfig, config_from_env
from assay.server.framing import LineFramer, Oversize
from assay.server.log import Logger
from assay.server.protocol import ServerProtocol
from tests.server._helpers import FIXTURES, run_server


def make_proto(root, **config) -> tuple[ServerProtocol, Logger]:
    logger = Logger(None, "debug")
    logger.records = []
    return ServerProtocol(str(root), ServerConfig(**config), logger), logger


def test_framer_counts_without_terminator_and_bounds_memory():
    """docs/server.md, "Protocol": N bytes passes with `\\n` or `\\r\\n`; N+1 is Oversize with its
    true size, even when it arrives in many chunks; the buffer never grows past N+1."""
    f = LineFramer(5)
    assert f.feed(b"abcde\nabcde\r\nabcdef\n") == [b"abcde", b"abcde", Oversize(6)]
    out = []
    for _ in range(1000):
        out += f.feed(b"x" * 997)
        assert len(f._buf) <= 6
    out += f.feed(b"\r\nok")
    assert out == [Oversize(997_000)]
    assert f.eof() == [b"ok"]
    assert f.eof() == []
    g = LineFramer(3)
    assert g.feed(b"abc") == [] and g.feed(b"\r") == [] and g.feed(b"\n") == [b"abc"]


def test_framer_oversize_unterminated_at_eof():
    f = LineFramer(2)
    assert f.feed(b"abcdef") == []
    assert f.eof() == [Oversize(6)]


def test_config_defaults_and_parsing():
    """docs/server.md, "Environment": absent/unparsable/negative keep the default;
    ASSAY_MCP_TEST_SLOW_MS is off by default."""
    c = config_from_env({})
    assert (
        c.timeout_ms,
        c.max_msg_bytes,
        c.max_policy_bytes,
        c.max_field_bytes,
        c.max_tool_calls,
        c.cache_entries,
    ) == (
        2000,
        1_000_000,
        1_000_000,
        64_000,
        2000,
        128,
    )
    assert c.test_slow_ms is None and c.invalid == ()
    c = config_from_env({"ASSAY_MCP_MAX_BYTES": " 42 ", "ASSAY_MCP_TIMEOUT_MS": "-1", "ASSAY_MCP_CACHE_ENTRIES": "1e3"})
    assert c.max_msg_bytes == 42 and c.timeout_ms == 2000 and c.cache_entries == 128
    assert c.invalid == ("ASSAY_MCP_TIMEOUT_MS", "ASSAY_MCP_CACHE_ENTRIES")


def test_blocking_driver_matches_section10(tmp_path):
    proto, logger = make_proto(tmp_path)
    (tmp_path / "b.yaml").write_text(FIXTURES["blocklist_policy.yaml"])
    out = proto.handle_blocking(
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"assay_policy_decide",'
        b'"arguments":{"tool":"dangerous_tool","policy":"b.yaml"}}}'
    )
    assert out == (
        b'{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"{\\n  \\"allowed\\": false,\\n  \\"matches\\": [\\n'
        b'    \\"Tool \'dangerous_tool\' is blocked by policy\\"\\n  ]\\n}"}],"isError":true},"id":3}\n'
    )
    assert [r["fields"]["event"] for r in logger.records] == [
        "assay.usage.metered",
        "tool_call_start",
        "cache_miss",
        "tool_call_done",
        "tool_decision",
    ]


def test_cache_keyed_by_content_and_failures_not_cached(tmp_path):
    """K1/K2: an edit takes effect on the next call; a parse failure is never stored."""
    proto, logger = make_proto(tmp_path)
    p = tmp_path / "b.yaml"

    def decide():
        line = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "assay_policy_decide", "arguments": {"tool": "t", "policy": "b.yaml"}},
            }
        ).encode()
        return json.loads(json.loads(proto.handle_blocking(line))["result"]["content"][0]["text"])

    p.write_text("blocklist: [t]\n")
    assert decide()["allowed"] is False
    assert decide()["allowed"] is False
    p.write_text("blocklist: [u]\n")
    assert decide()["allowed"] is True
    p.write_text("blocklist: t\n")
    assert decide()["error"]["message"] == "Policy structure is invalid"
    assert decide()["error"]["message"] == "Policy structure is invalid"
    events = [r["fields"]["event"] for r in logger.records if r["fields"]["event"].startswith("cache_")]
    assert events == ["cache_miss", "cache_hit", "cache_miss", "cache_miss", "cache_miss"]
    assert len(proto.ctx.caches["blocklist"]) == 2


def test_exception_in_handler_is_exactly_e_internal(tmp_path):
    """F2: a handler crash yields exactly the E_INTERNAL payload and a tool_execution_error."""
    proto, logger = make_proto(tmp_path)
    out = proto.handle_blocking(
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"assay_check_coverage","arguments":{"policy":"x","traces":"SENTINEL"}}}'
    )
    text = json.loads(out)["result"]["content"][0]["text"]
    assert json.loads(text) == {"allowed": False, "error": {"code": "E_INTERNAL", "message": "Tool execution failed"}}
    assert any(r["fields"]["event"] == "tool_execution_error" for r in logger.records)
    assert "SENTINEL" not in json.dumps([r["fields"] for r in logger.records])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
methods = st.sampled_from(
    ["initialize", "ping", "tools/list", "tools/call", "server/discover", "notifications/x"]
) | st.text(max_size=10)
tool_names = st.sampled_from(
    [
        "assay_check_args",
        "assay_check_sequence",
        "assay_policy_decide",
        "assay_check_coverage",
        "assay_explain_trace",
        "assay_server_identity",
    ]
) | st.text(max_size=10)


@st.composite
def messages(draw):
    msg = {"jsonrpc": "2.0", "method": draw(methods)}
    if draw(st.booleans()):
        msg["id"] = draw(json_values)
    if msg["method"] == "tools/call" and draw(st.booleans()):
        args = draw(
            st.dictionaries(
                st.sampled_from(
                    [
                        "tool",
                        "policy",
                        "arguments",
                        "history",
                        "next_tool",
                        "traces",
                        "trace",
                        "threshold",
                        "format",
                        "on_error",
                    ]
                ),
                json_values,
                max_size=5,
            )
        )
        if draw(st.booleans()):
            args["policy"] = draw(st.sampled_from(["b.yaml", "../b.yaml", "/etc/passwd", "", "s.yaml", "nope.yaml"]))
        msg["params"] = {"name": draw(tool_names), "arguments": args}
    elif draw(st.booleans()):
        msg["params"] = draw(json_values)
    return json.dumps(msg, ensure_ascii=draw(st.booleans())).encode()


lines = st.binary(max_size=200) | messages() | st.text(max_size=100).map(lambda t: t.encode("utf-8", "surrogatepass"))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=lines)
def test_property_any_line_gives_one_json_line_or_nothing(tmp_path, line):
    """T2/T7/T10: every reply is one compact JSON object in valid UTF-8 with the fixed member
    order; nothing raises."""
    (tmp_path / "b.yaml").write_text("blocklist: [x]\n")
    (tmp_path / "s.yaml").write_text(FIXTURES["seq_full.yaml"])
    proto, _ = make_proto(tmp_path, max_msg_bytes=150)
    framer = LineFramer(150)
    for frame in framer.feed(line.replace(b"\n", b" ") + b"\n"):
        out = proto.handle_blocking(frame)
        if out is None:
            continue
        assert out.endswith(b"\n") and out.count(b"\n") == 1
        obj = json.loads(out.decode("utf-8"))
        assert list(obj)[0] == "jsonrpc" and list(obj)[-1] == "id" and len(obj) == 3


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(lines, min_size=1, max_size=40))
def test_property_process_level_stdout_is_json_only(tmp_path, base_env, batch):
    """One process per example: stdout holds only JSON-RPC lines, stderr only JSON log lines,
    exit 0 at EOF."""
    root = tmp_path / "r"
    root.mkdir(exist_ok=True)
    (root / "b.yaml").write_text("blocklist: [x]\n")
    s = run_server(root, b"\n".join(batch) + b"\n", dict(base_env, ASSAY_MCP_MAX_BYTES="150"))
    assert s.returncode == 0
    for out in s.lines:
        obj = json.loads(out.decode("utf-8"))
        assert obj["jsonrpc"] == "2.0" and "id" in obj
    for err in s.stderr.splitlines():
        assert set(json.loads(err)) == {"timestamp", "level", "fields", "target"}
