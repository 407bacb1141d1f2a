"""Byte-exact exchanges and the error catalogue, against the real server process
(docs/server.md, "Protocol", "Tools" and "Error catalogue")."""

from __future__ import annotations

import json

from assay import __version__
from tests.server._helpers import call, payload_of

V = __version__


def test_documented_exchange_byte_exact(serve):
    """A whole session byte for byte (docs/server.md, "Protocol"); the version is the package
    version."""
    stdin = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        b"NOT JSON\n"
        b'{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}\n'
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"assay_policy_decide","arguments":{"tool":"dangerous_tool","policy":"blocklist_policy.yaml"}}}\n'
        b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"assay_server_identity","arguments":{}}}\n'
    )
    s = serve(stdin)
    assert s.returncode == 0
    assert s.stdout.decode() == (
        '{"jsonrpc":"2.0","result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"assay-mcp-server","version":"%s"}},"id":1}\n'
        '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":2}\n'
        '{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"{\\n  \\"allowed\\": false,\\n  \\"matches\\": [\\n    \\"Tool \'dangerous_tool\' is blocked by policy\\"\\n  ]\\n}"}],"isError":true},"id":3}\n'
        '{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"{\\n  \\"name\\": \\"assay-mcp-server\\",\\n  \\"version\\": \\"%s\\"\\n}"}],"isError":false},"id":9}\n'
    ) % (V, V)
    assert s.fields("json_parse_error")[0]["rid"] == "r-000003"  # T4: every line takes a rid
    assert s.fields("initialized") == [{"event": "initialized", "rid": "r-000002"}]


def test_schema_deny_unconstrained_and_sequence_payloads(serve):
    """Decoded payloads (docs/server.md, "Tools"): E_ARG_SCHEMA deny, unconstrained warning,
    sequence `before`."""
    s = serve(
        [
            call(
                1,
                "assay_check_args",
                {"tool": "strict_tool", "arguments": {"code": 123, "extra": "field"}, "policy": "strict_policy.yaml"},
            ),
            call(2, "assay_check_args", {"tool": "anything", "arguments": {}, "policy": "policy.yaml"}),
            call(3, "assay_check_sequence", {"history": [], "next_tool": "Create", "policy": "sequence.yaml"}),
        ]
    )
    r1, r2, r3 = s.responses
    violation = {"path": "", "message": "Additional properties are not allowed ('extra' was unexpected)"}
    assert r1["result"]["isError"] is True
    assert payload_of(r1) == {
        "allowed": False,
        "code": "E_ARG_SCHEMA",
        "reason": "JSON Schema validation failed",
        "violations": [violation],
        "suggested_fix": None,
        "contract": {"status": "deny", "error_code": "E_ARG_SCHEMA", "tool": "strict_tool", "violations": [violation]},
    }
    assert r2["result"]["isError"] is False
    assert payload_of(r2) == {
        "allowed": True,
        "warning": {"code": "E_TOOL_UNCONSTRAINED", "reason": "Tool allowed but has no schema"},
        "violations": [],
        "suggested_fix": None,
    }
    assert r3["result"]["isError"] is True
    assert payload_of(r3) == {
        "allowed": False,
        "violations": [
            {
                "rule_type": "before",
                "constraint": "before",
                "message": "tool 'Create' was found (index 0) but required preceding tool 'Search' was missing",
                "spanned": [0],
                "tool": "Create",
                "event_index": 0,
            }
        ],
        "suggested_fix": None,
    }


def test_initialize_exact_result_and_negotiation(serve):
    """docs/server.md, "Protocol": supported versions echoed, others answered with 2025-11-25, bad
    shapes -32602."""

    def init(i, version, **extra):
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
        params.update(extra)
        return {"jsonrpc": "2.0", "id": i, "method": "initialize", "params": params}

    s = serve(
        [
            init(1, "2024-11-05"),
            init(2, "2025-03-26"),
            init(3, "2025-06-18"),
            init(4, "future-version", extra_member=True),
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": [],
                    "clientInfo": {"name": "c", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "id": 6, "method": "initialize"},
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "SENTINEL-C"}},
            },
        ]
    )
    lines = [line.decode() for line in s.lines]
    for i, version in ((1, "2024-11-05"), (2, "2025-03-26"), (3, "2025-06-18"), (4, "2025-11-25")):
        assert lines[i - 1] == (
            '{"jsonrpc":"2.0","result":{"protocolVersion":"%s","capabilities":{"tools":{}},'
            '"serverInfo":{"name":"assay-mcp-server","version":"%s"}},"id":%d}\n' % (version, V, i)
        )
    bad = '{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid initialize params: expected the required legacy MCP fields"},"id":%d}\n'
    assert lines[4:] == [bad % 5, bad % 6, bad % 7]
    assert b"SENTINEL-C" not in s.stderr


def test_revision_gate_requests_only(serve):
    """docs/server.md, "Protocol": a string _meta revision outside the set -> -32022 before
    dispatch; non-strings and notifications are not gated; a modern server/discover probe is gated
    too."""
    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    s = serve(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": meta},
            {"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": meta},
            {"jsonrpc": "2.0", "method": "notifications/initialized", "params": meta},
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "ping",
                "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": 5}},
            },
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "ping",
                "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-06-18"}},
            },
        ]
    )
    gate = (
        '{"jsonrpc":"2.0","error":{"code":-32022,"message":"unsupported protocol version","data":'
        '{"requested":"2026-07-28","supported":["2024-11-05","2025-03-26","2025-06-18","2025-11-25"]}},"id":%d}\n'
    )
    assert [line.decode() for line in s.lines] == [
        gate % 1,
        gate % 2,
        '{"jsonrpc":"2.0","result":{},"id":3}\n',
        '{"jsonrpc":"2.0","result":{},"id":4}\n',
    ]


def test_notifications_never_answered_and_unknown_methods(serve):
    """docs/server.md, "Protocol": ping -> {}; id-less messages and notifications/* never answered;
    unknown methods -32601 without echoing the name; the id is echoed whatever its type."""
    s = serve(
        [
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
            {"jsonrpc": "2.0", "id": 1, "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "method": "tools/list"},
            {"jsonrpc": "2.0", "method": "ping"},
            {"jsonrpc": "2.0", "id": "abc", "method": "ping"},
            {"jsonrpc": "2.0", "id": None, "method": "resources/list"},
            {"jsonrpc": "2.0", "id": {"k": [1]}, "method": "SENTINEL/method"},
            {"jsonrpc": "2.0", "id": 2.5, "method": "tools/list", "params": None},
        ]
    )
    lines = [line.decode() for line in s.lines]
    assert lines[0] == '{"jsonrpc":"2.0","result":{},"id":"abc"}\n'
    assert lines[1] == '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":null}\n'
    assert lines[2] == '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":{"k":[1]}}\n'
    assert json.loads(lines[3])["id"] == 2.5 and len(lines) == 4
    assert b"SENTINEL" not in s.stdout + s.stderr


def test_unparsable_lines_ignored_without_echo(serve):
    """docs/server.md, "Protocol": malformed JSON, arrays, scalars, responses, duplicates, invalid
    UTF-8 -> no reply, a json_parse_error log without the content; the server keeps serving."""
    bad = [
        b"{SENTINEL-1",
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]',
        b'"SENTINEL-2"',
        b'{"jsonrpc":"2.0","id":1,"result":{"SENTINEL-3":1}}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","method":"ping","x":"SENTINEL-4"}',
        b'{"jsonrpc":2,"id":1,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":"SENTINEL-5\xff"}',
        b"\xc3\x28SENTINEL-6",
    ]
    s = serve(bad + [b"   \t", b"", b'{"jsonrpc":"2.0","id":7,"method":"ping"}'])
    assert s.stdout == b'{"jsonrpc":"2.0","result":{},"id":7}\n'
    errors = s.fields("json_parse_error")
    assert [e["rid"] for e in errors] == [f"r-{i:06d}" for i in range(1, 9)]
    assert b"SENTINEL" not in s.stderr
    assert s.returncode == 0


def test_tools_list_order_schemas_and_size(serve):
    """docs/server.md, "Tools": six tools in order, closed schemas, no on_error, response <= 16 KiB."""
    s = serve([{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "x"}}])
    assert len(s.stdout) <= 16384
    tools = s.responses[0]["result"]["tools"]
    assert "nextCursor" not in s.responses[0]["result"]
    assert [t["name"] for t in tools] == [
        "assay_check_args",
        "assay_check_sequence",
        "assay_policy_decide",
        "assay_check_coverage",
        "assay_explain_trace",
        "assay_server_identity",
    ]
    required = {
        "assay_check_args": ["tool", "arguments", "policy"],
        "assay_check_sequence": ["history", "next_tool", "policy"],
        "assay_policy_decide": ["tool", "policy"],
        "assay_check_coverage": ["policy", "traces"],
        "assay_explain_trace": ["policy", "trace"],
    }
    for tool in tools:
        assert set(tool) == {"name", "description", "inputSchema"}
        schema = tool["inputSchema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert schema.get("required", []) == required.get(tool["name"], [])
        assert "on_error" not in json.dumps(schema)
    assert tools[-1]["inputSchema"] == {"type": "object", "properties": {}, "additionalProperties": False}


def test_error_catalogue(serve, policy_root):
    """docs/server.md, "Error catalogue": every row, one request each, exact payloads."""
    (policy_root / "big.yaml").write_bytes(b"#" * 101)
    (policy_root / "adir").mkdir()
    env = {"ASSAY_MCP_MAX_POLICY_BYTES": "100"}
    s = serve(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "nope"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call"},
            call(3, "assay_policy_decide", {"tool": "t", "policy": "big.yaml"}),
            call(4, "assay_policy_decide", {"tool": "t"}),
            call(5, "assay_policy_decide", {"tool": "t", "policy": "  "}),
            call(6, "assay_policy_decide", {"tool": "t", "policy": "/etc/passwd"}),
            call(7, "assay_policy_decide", {"tool": "t", "policy": "../x.yaml"}),
            call(8, "assay_policy_decide", {"tool": "t", "policy": "missing.yaml"}),
            call(9, "assay_policy_decide", {"tool": "t", "policy": "adir"}),
            call(10, "assay_policy_decide", {"tool": "t", "policy": "bad_syntax.yaml"}),
            call(11, "assay_check_sequence", {"history": [], "next_tool": "x", "policy": "bad_syntax.yaml"}),
            call(
                12, "assay_check_coverage", {"policy": "seq_full.yaml", "traces": [{"tools": ["a"]}], "threshold": 101}
            ),
            call(13, "assay_server_identity", {"x": 1}),
            call(14, "assay_check_args", {"tool": "x" * 65, "arguments": {}, "policy": "p.yaml"}),
        ],
        env=dict(env, ASSAY_MCP_MAX_FIELD_BYTES="64"),
    )
    r = s.responses
    assert r[0]["error"] == {"code": -32601, "message": "Method not found"}
    assert r[1]["error"] == {"code": -32602, "message": "Missing params"}

    def err(code, message, **extra):
        e = {"code": code, "message": message}
        e.update(extra)
        return {"allowed": False, "error": e}

    payloads = [payload_of(x) for x in r[2:]]
    assert payloads == [
        err("E_LIMIT_EXCEEDED", "policy file exceeds the configured byte limit"),
        err("E_INTERNAL", "Tool execution failed"),
        err("E_INVALID_REQUEST", "policy path is empty"),
        err("E_PERMISSION_DENIED", "absolute paths are not allowed"),
        err("E_PERMISSION_DENIED", "path escapes policy_root"),
        err("E_POLICY_NOT_FOUND", "Policy not found: missing.yaml"),
        err("E_POLICY_READ", "Is a directory"),
        err("E_POLICY_PARSE", "Policy YAML is invalid", details={"line": 2, "column": 4}),
        err("E_POLICY_PARSE", "Invalid sequence policy format"),
        err("E_INVALID_THRESHOLD", "Threshold must be between 0 and 100"),
        {"error": {"code": "E_INVALID_ARGS", "message": "assay_server_identity takes no arguments"}},
        err("E_LIMIT_EXCEEDED", "tool name too long"),
    ]
    assert all(x["result"]["isError"] is True for x in r[2:])
    assert len(s.fields("tool_call_start")) == 12  # -32602 Missing params has no tool events
    assert str(policy_root).encode() not in s.stdout


def test_line_limit_at_exactly_n_and_n_plus_1(serve):
    """docs/server.md, "Protocol": a line of exactly N bytes (terminator not counted, also with
    CRLF) is served; N+1 gets the bare E_LIMIT_EXCEEDED result with id null; the server goes on."""
    base = b'{"jsonrpc":"2.0","id":1,"method":"ping","pad":"'
    n = 200
    exact = base + b"x" * (n - len(base) - 2) + b'"}'
    assert len(exact) == n
    over = base + b"x" * (n - len(base) - 1) + b'"}'
    huge = b"y" * 5_000_000
    stdin = exact + b"\n" + exact + b"\r\n" + over + b"\n" + huge + b"\n" + b'{"jsonrpc":"2.0","id":2,"method":"ping"}'
    s = serve(stdin, env={"ASSAY_MCP_MAX_BYTES": str(n)})
    assert s.stdout.decode() == (
        '{"jsonrpc":"2.0","result":{},"id":1}\n'
        '{"jsonrpc":"2.0","result":{},"id":1}\n'
        '{"jsonrpc":"2.0","result":{"allowed":false,"error":{"code":"E_LIMIT_EXCEEDED","message":"message bytes=201 > max=200"}},"id":null}\n'
        '{"jsonrpc":"2.0","result":{"allowed":false,"error":{"code":"E_LIMIT_EXCEEDED","message":"message bytes=5000000 > max=200"}},"id":null}\n'
        '{"jsonrpc":"2.0","result":{},"id":2}\n'
    )
    limits = s.fields("limit_exceeded")
    assert [(e["rid"], e["bytes_in"], e["max"]) for e in limits] == [
        ("r-000003", 201, 200),
        ("r-000004", 5_000_000, 200),
    ]


def test_policy_limit_at_exactly_n_and_n_plus_1_never_cached(serve, policy_root):
    """B1/B2/K2: exactly N bytes is parsed; N+1 is refused every time, never parsed or cached."""
    n = 300
    body = b"blocklist: [dangerous_tool]\n"
    (policy_root / "exact.yaml").write_bytes(body + b"#" * (n - len(body)))
    (policy_root / "over.yaml").write_bytes(body + b"#" * (n + 1 - len(body)))
    args = lambda p: {"tool": "dangerous_tool", "policy": p}  # noqa: E731
    s = serve(
        [
            call(1, "assay_policy_decide", args("exact.yaml")),
            call(2, "assay_policy_decide", args("over.yaml")),
            call(3, "assay_policy_decide", args("over.yaml")),
            call(4, "assay_check_args", {"tool": "t", "arguments": {}, "policy": "over.yaml"}),
            call(5, "assay_check_sequence", {"history": [], "next_tool": "t", "policy": "over.yaml"}),
            call(6, "assay_check_coverage", {"policy": "over.yaml", "traces": [{"tools": ["t"]}]}),
            call(7, "assay_explain_trace", {"policy": "over.yaml", "trace": [{"tool": "t"}]}),
        ],
        env={"ASSAY_MCP_MAX_POLICY_BYTES": str(n), "ASSAY_LOG": "debug"},
    )
    r = s.responses
    assert payload_of(r[0])["matches"] == ["Tool 'dangerous_tool' is blocked by policy"]
    limit = {
        "allowed": False,
        "error": {"code": "E_LIMIT_EXCEEDED", "message": "policy file exceeds the configured byte limit"},
    }
    assert [payload_of(x) for x in r[1:]] == [limit] * 6
    # only the exact-size file ever reached the parser/cache
    assert len(s.fields("cache_miss")) == 1 and s.fields("cache_hit") == []


def test_on_error_has_no_effect_and_unknown_tools_fail_closed(serve):
    """F4, P14: on_error changes nothing; unknown/empty/non-string names -> E_INTERNAL, not echoed."""
    deny = {"tool": "dangerous_tool", "policy": "blocklist_policy.yaml"}
    s = serve(
        [
            call(1, "assay_policy_decide", deny),
            call(1, "assay_policy_decide", dict(deny, on_error="allow")),
            call(2, "SENTINEL_tool", {"on_error": "allow"}),
            call(3, ""),
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": 42}},
            {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": ["x"]},
            call(6, "assay_policy_decide", ["not", "an", "object"]),
        ]
    )
    assert s.lines[0] == s.lines[1]
    internal = {"allowed": False, "error": {"code": "E_INTERNAL", "message": "Tool execution failed"}}
    for response in s.responses[2:]:
        assert payload_of(response) == internal and response["result"]["isError"] is True
        assert "warning" not in response["result"]["content"][0]["text"]
    assert b"SENTINEL" not in s.stdout + s.stderr
    assert len(s.fields("tool_execution_error")) == 5
