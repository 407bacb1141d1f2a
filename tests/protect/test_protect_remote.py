"""Remote (url) entries under `assay mcp wrap --url` (docs/protect.md, "Remote servers"): every
client's spelling is wrapped, header values go to ``env`` and never to ``args`` or protect's
record, undo gives back the original bytes, protect twice changes nothing, a failed protect
changes nothing."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay import clients
from assay.clients import protect as p
from assay.clients.configs import parse_config_file
from assay.clients.protect.check import load
from assay.wrap.optionline import option_tokens
from assay.discover.report import build_document, render_table

OPTS = p.WrapOptions("/opt/venv/bin/assay", "/etc/assay/policy.yaml")


def protect(text, loc, record):
    return p.protect_text(text, loc, OPTS, record)


# (client, file text, the args after the usual options, the entry's env after protect)
SPELLINGS = [
    (
        "claude_code",
        '{"mcpServers": {"r": {"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}}}',
        ["--url", "https://h/mcp", "--header-env", "Authorization=ASSAY_HEADER_1"],
        {"ASSAY_HEADER_1": "Bearer ${TOKEN}"},
    ),
    (
        "claude_code",
        '{"mcpServers": {"r": {"type": "sse", "url": "https://h/sse"}}}',
        ["--url", "https://h/sse", "--transport", "sse"],
        None,
    ),
    (
        "claude_desktop",
        '{"mcpServers": {"r": {"url": "https://h/mcp", "headers": {"X-Key": "k"}}}}',
        ["--url", "https://h/mcp", "--header-env", "X-Key=ASSAY_HEADER_1"],
        {"ASSAY_HEADER_1": "k"},
    ),
    (
        "cursor",
        '{\n  "mcpServers": {\n    "r": {\n      "url": "https://h/mcp",\n      "headers": {\n        "A": "${env:A}",\n        "B": "b"\n      }\n    }\n  }\n}\n',
        ["--url", "https://h/mcp", "--header-env", "A=ASSAY_HEADER_1", "--header-env", "B=ASSAY_HEADER_2"],
        {"ASSAY_HEADER_1": "${env:A}", "ASSAY_HEADER_2": "b"},
    ),
    (
        "vscode",
        '{\n  // c\n  "servers": {\n    "r": {"type": "http", /* x */ "url": "https://h/mcp", "headers": {"A": "${input:k}"},},\n  },\n}\n',
        ["--url", "https://h/mcp", "--header-env", "A=ASSAY_HEADER_1"],
        {"ASSAY_HEADER_1": "${input:k}"},
    ),
    (
        "windsurf",
        '{"mcpServers": {"r": {"serverUrl": "https://h/mcp", "headers": {"A": "a"}}}}',
        ["--url", "https://h/mcp", "--header-env", "A=ASSAY_HEADER_1"],
        {"ASSAY_HEADER_1": "a"},
    ),
    (
        "gemini_cli",
        '{"mcpServers": {"r": {"httpUrl": "https://h/mcp", "headers": {"A": "$A"}, "timeout": 5000}}}',
        ["--url", "https://h/mcp", "--header-env", "A=ASSAY_HEADER_1"],
        {"ASSAY_HEADER_1": "$A"},
    ),
    (
        "gemini_cli",
        '{"mcpServers": {"r": {"url": "https://h/sse"}}}',
        ["--url", "https://h/sse", "--transport", "sse"],
        None,
    ),
    (
        "zed",
        '{"context_servers": {"r": {"url": "https://h/mcp", "headers": { "Authorization": "Bearer t" },},},}',
        ["--url", "https://h/mcp", "--header-env", "Authorization=ASSAY_HEADER_1"],
        {"ASSAY_HEADER_1": "Bearer t"},
    ),
    (
        "codex",
        '[mcp_servers.r]\nurl = "https://h/mcp"  # remote\nhttp_headers = { "A" = \'lit\', B = "b" }\ntool_timeout_sec = 60\n',
        ["--url", "https://h/mcp", "--header-env", "A=ASSAY_HEADER_1", "--header-env", "B=ASSAY_HEADER_2"],
        {"ASSAY_HEADER_1": "lit", "ASSAY_HEADER_2": "b"},
    ),
]


def location(label: str, path: str = "/tmp/config") -> clients.ConfigLocation:
    return clients.pick_location(label, "user", path, "linux", "/home/u", {}, "/tmp")


def entry(text: str, loc: clients.ConfigLocation) -> dict:
    doc = load(text, loc)
    return doc[loc.servers_key]["r"]


@pytest.mark.parametrize("label,text,tail,env", SPELLINGS, ids=[f"{s[0]}-{i}" for i, s in enumerate(SPELLINGS)])
def test_each_clients_remote_spelling_is_wrapped_and_undone_byte_for_byte(tmp_path, label, text, tail, env):
    path = tmp_path / ("config.toml" if label == "codex" else "config.json")
    path.write_text(text)
    loc = location(label, str(path))
    first = p.apply_to_file(str(path), loc, protect)
    assert first.written and [c.action for c in first.result.changes] == ["wrapped"]
    wrapped = entry(path.read_text(), loc)
    assert wrapped["command"] == OPTS.assay
    assert wrapped["args"][wrapped["args"].index("--url") :] == tail
    assert wrapped.get("env") == env
    assert not {"url", "serverUrl", "httpUrl", "headers", "http_headers"} & set(wrapped)
    if label == "vscode":
        assert wrapped["type"] == "stdio"
    # discover sees it wrapped, a remote server
    servers, _ = parse_config_file(path.read_bytes(), loc)
    assert (servers[0]["wrapped"], servers[0]["remote"]) == (True, True)
    # no header value in args or in protect's record
    record = open(first.record_path, encoding="utf-8").read()
    for value in (env or {}).values():
        assert len(value) < 4 or value not in " ".join(wrapped["args"]) and json.dumps(value)[1:-1] not in record
    # protect twice changes nothing
    again = p.apply_to_file(str(path), loc, protect)
    assert not again.written
    undone = p.apply_to_file(str(path), loc, p.undo_text)
    assert undone.written and path.read_text() == text


def test_a_failed_protect_changes_nothing(tmp_path):
    text = SPELLINGS[0][1]
    path = tmp_path / "c.json"
    path.write_text(text)
    loc = location("claude_code", str(path))

    def changes_meanwhile(t, loc_, record):
        result = p.protect_text(t, loc_, p.WrapOptions("/a/assay", "/p.yaml"), record)
        path.write_text(text + " ")  # the client saves the file while protect works
        return result

    with pytest.raises(p.ProtectError, match="changed while assay worked on it"):
        p.apply_to_file(str(path), loc, changes_meanwhile)
    assert path.read_text() == text + " "  # the client's save, and nothing of protect's
    assert not os.path.exists(
        p.state.record_path(os.path.join(os.environ["XDG_STATE_HOME"], "assay"), "claude_code", os.path.realpath(path))
    )


@pytest.mark.parametrize(
    "headers,reason",
    [
        ({"Bad Name": "v"}, "is not an HTTP header name"),
        ({"A": "line\nbreak"}, "line break"),
        ({"A": 1}, "not an object of strings"),
    ],
)
def test_headers_protect_cannot_carry_leave_the_entry_with_a_reason(headers, reason):
    text = json.dumps({"mcpServers": {"r": {"url": "https://h/mcp", "headers": headers}}})
    result = p.protect_text(text, location("cursor"), OPTS)
    assert [(c.action, reason in c.detail) for c in result.changes] == [("skipped", True)] and result.text == text


def test_a_websocket_or_a_codex_entry_wrap_cannot_carry_is_left_with_a_reason():
    ws = p.protect_text('{"mcpServers": {"r": {"type": "ws", "url": "wss://h/"}}}', location("claude_code"), OPTS)
    assert "WebSocket" in ws.changes[0].detail
    for body, why in (
        ('bearer_token = "inline"\n', '"bearer_token": Codex reads this'),
        ('[mcp_servers.r.oauth]\nclient_id = "x"\n', '"oauth"'),
        ('bearer_token_env_var = "not a name"\n', "not a variable name"),
        ('env_http_headers = { "X" = "1BAD" }\n', "not a variable name"),
        ('env_http_headers = { "Bad Name" = "V" }\n', "not an HTTP header name"),
        ('env_http_headers = { "X" = 1 }\n', "not a table of strings"),
        ('env_vars = ["A"]\n', '"env_vars"'),
        ('bearer_token_env_var = "T"\nhttp_headers = { "authorization" = "x" }\n', "both"),
        ('env_http_headers = { "X" = "V" }\nhttp_headers = { "x" = "v" }\n', "twice"),
    ):
        toml = '[mcp_servers.r]\nurl = "https://h/mcp"\n' + body
        codex = p.protect_text(toml, location("codex"), OPTS)
        assert codex.text == toml and why in codex.changes[0].detail, (body, codex.changes)


@pytest.mark.parametrize(
    "body,args,forwarded",
    [
        ('bearer_token_env_var = "FIGMA_TOKEN"\n', ["--bearer-env", "FIGMA_TOKEN"], ["FIGMA_TOKEN"]),
        (
            'env_http_headers = { "X-Api-Key" = "API_KEY", X-Team = \'TEAM\' }  # keys from the environment\n',
            ["--header-env-if-set", "X-Api-Key=API_KEY", "--header-env-if-set", "X-Team=TEAM"],
            ["API_KEY", "TEAM"],
        ),
        (
            'env_http_headers = { "X-Api-Key" = "TOKEN" }\nhttp_headers = { "X-Client" = "codex" }\nbearer_token_env_var = "TOKEN"\n',
            [
                "--header-env",
                "X-Client=ASSAY_HEADER_1",
                "--header-env-if-set",
                "X-Api-Key=TOKEN",
                "--bearer-env",
                "TOKEN",
            ],
            ["TOKEN"],
        ),
    ],
)
def test_codex_variables_pass_on_to_the_wrapped_entry_and_undo_gives_the_bytes_back(body, args, forwarded):
    # docs/protect.md, "Remote servers": the value stays in Codex's environment; the wrapped stdio
    # entry gets the variable through env_vars, wrap reads it there; no value in args or the file
    toml = 'model = "m"\n\n[mcp_servers.r]\nurl = "https://h/mcp"\n' + body + "tool_timeout_sec = 60\n\n[x]\ny = 1\n"
    loc = location("codex")
    result = p.protect_text(toml, loc, OPTS)
    assert [c.action for c in result.changes] == ["wrapped"], result.changes
    got = entry(result.text, loc)
    assert got["args"][got["args"].index("--url") :] == ["--url", "https://h/mcp", *args]
    assert got["env_vars"] == forwarded and got["tool_timeout_sec"] == 60
    assert "bearer_token_env_var" not in got and "env_http_headers" not in got and "url" not in got
    assert p.protect_text(result.text, loc, OPTS, result.record).text == result.text
    assert p.undo_text(result.text, loc, result.record).text == toml


_NAMES = st.text(alphabet=st.sampled_from("AZaz09-_!#$%&'*+.^`|~"), min_size=1, max_size=12)
_VALUES = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"), max_size=30
) | st.sampled_from(["${TOKEN}", "Bearer ${A:-b}", '"quoted"', "'single'", "é ü 中", "\\", "${"])


@settings(max_examples=60, deadline=None)
@given(
    headers=st.dictionaries(_NAMES, _VALUES, max_size=4),
    label=st.sampled_from(["claude_code", "vscode", "zed", "codex"]),
)
def test_hostile_header_names_and_values_round_trip_and_stay_out_of_args(headers, label):
    loc = location(label)
    if label == "codex":
        from assay.clients.protect.tomltext import toml_string

        pairs = ", ".join(f"{toml_string(k)} = {toml_string(v)}" for k, v in headers.items())
        text = f'[mcp_servers.r]\nurl = "https://h/mcp"\nhttp_headers = {{ {pairs} }}\n'
    else:
        text = json.dumps({loc.servers_key: {"r": {"url": "https://h/mcp", "headers": headers}}}, indent=2)
    result = p.protect_text(text, loc, OPTS)
    assert [c.action for c in result.changes] == ["wrapped"]
    wrapped = entry(result.text, loc)
    assert list(wrapped.get("env", {}).values()) == list(headers.values())
    args = wrapped["args"]
    header_args = [
        a.removeprefix("--header-env=")
        for i, a in enumerate(args)
        if a.startswith("--header-env=") or (i and args[i - 1] == "--header-env")
    ]
    assert header_args == [f"{k}=ASSAY_HEADER_{n}" for n, k in enumerate(headers, 1)]
    assert "${" not in " ".join(args)  # nothing a client could expand from its own environment
    record = json.dumps([[m.original, m.written] for r in result.record or [] for m in r.edits], ensure_ascii=False)
    for value in headers.values():
        if len(value) > 3:
            assert value not in record
    assert p.protect_text(result.text, loc, OPTS, result.record).text == result.text
    assert p.undo_text(result.text, loc, result.record).text == text


def test_discover_says_remote_in_its_own_words(tmp_path):
    loc = location("cursor", str(tmp_path / "mcp.json"))
    text = '{"mcpServers": {"a": {"url": "https://h/mcp"}, "b": {"url": "https://h/mcp"}}}'
    wrapped_b = p.protect_text(text, loc, OPTS).text
    doc = json.loads(wrapped_b)
    doc["mcpServers"]["a"] = {"url": "https://h/mcp"}
    servers, _ = parse_config_file(json.dumps(doc).encode(), loc)
    assert [(s["name"], s["remote"], s["wrapped"], s["policy_status"]) for s in servers] == [
        ("a", True, False, "unmanaged"),
        ("b", True, True, "managed"),
    ]
    table = render_table(
        build_document(servers, [], generated_at_ns=0, host={"hostname": "h", "os": "linux", "arch": "x"}), 0
    )
    assert "no (remote)" in table and "yes (remote)" in table


_VARS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(
    env_headers=st.dictionaries(_NAMES, _VARS, max_size=3),
    bearer=st.none() | _VARS,
    eol=st.sampled_from(["\n", "\r\n"]),
    quote=st.sampled_from(['"', "'"]),
)
def test_any_codex_variables_pass_on_and_come_back_byte_for_byte(env_headers, bearer, eol, quote):
    env_headers = {k: v for k, v in env_headers.items() if k.lower() not in {o.lower() for o in env_headers if o != k}}
    if bearer is not None:
        env_headers = {k: v for k, v in env_headers.items() if k.lower() != "authorization"}
    if not env_headers and bearer is None:
        bearer = "TOKEN"
    lines = ["[mcp_servers.r]", 'url = "https://h/mcp"']
    if env_headers:
        pairs = ", ".join(f"{json.dumps(k)} = {quote}{v}{quote}" for k, v in env_headers.items())
        lines.append(f"env_http_headers = {{ {pairs} }}")
    if bearer is not None:
        lines.append(f"bearer_token_env_var = {quote}{bearer}{quote}")
    toml = eol.join(lines) + eol
    loc = location("codex")
    result = p.protect_text(toml, loc, OPTS)
    assert [c.action for c in result.changes] == ["wrapped"], result.changes
    got = entry(result.text, loc)
    want = [a for k, v in env_headers.items() for a in option_tokens("--header-env-if-set", f"{k}={v}")]
    want += option_tokens("--bearer-env", bearer) if bearer is not None else []
    assert got["args"][got["args"].index("--url") + 2 :] == want
    assert got["env_vars"] == list(dict.fromkeys([*env_headers.values(), *([bearer] if bearer else [])]))
    assert p.undo_text(result.text, loc, result.record).text == toml
