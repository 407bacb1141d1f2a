"""Sans-IO parts of discover, kill and the client table (docs/discover.md, docs/kill.md). No
processes, no files: values in, values out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay import clients
from assay import discover as d
from assay import kill as k
from assay.clients import ConfigLocation

CLAUDE = ConfigLocation("claude_desktop", "/h/.config/Claude/claude_desktop_config.json")
VSCODE = ConfigLocation("vscode", "/h/.config/Code/User/mcp.json", "servers", jsonc=True)


# ---------------------------------------------------------------- wrapped detection (docs/discover.md, "Output")


@pytest.mark.parametrize(
    "argv",
    [
        ["assay", "mcp", "wrap", "--policy", "p.yaml", "--", "npx", "x"],
        ["/home/u/.venv/bin/assay", "mcp", "wrap", "--", "srv"],
        ["/usr/bin/python3", "/home/u/.venv/bin/assay", "mcp", "wrap", "--", "srv"],
        ["C:\\Tools\\assay.exe", "mcp", "wrap", "--", "srv"],
    ],
)
def test_D30a_a_wrap_line(argv):
    assert d.parse_wrapped(argv) is not None


@pytest.mark.parametrize(
    "argv",
    [
        ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
        ["assay", "mcp", "discover"],
        ["assay", "wrap"],
        ["assay-mcp-server", "--policy-root", "."],
        ["npx", "--", "assay", "mcp", "wrap"],  # after "--" it is someone else's argv
        ["myassay", "mcp", "wrap"],
        [],
        # launchers are wraps only as processes, checked against the process tree
        ["sh", "-c", "exec assay mcp wrap --policy p.yaml -- npx -y srv"],
        ["uvx", "--from", "assay-mcp", "assay", "mcp", "wrap", "--", "srv"],
        ["python", "-m", "assay", "mcp", "wrap", "--", "srv"],  # there is no `python -m assay`
    ],
)
def test_D30a_not_wrapped(argv):
    assert d.parse_wrapped(argv) is None


def test_D7_process_markers_case_insensitive():
    assert d.looks_like_mcp_server(["node", "/x/@ModelContextProtocol/Server-Github/dist/index.js"])
    assert d.looks_like_mcp_server(["python", "-m", "my_mcp_server"])
    assert d.looks_like_mcp_server(["/usr/bin/assay-mcp-server"])
    assert not d.looks_like_mcp_server(["python", "server.py", "mcp"])


# ---------------------------------------------------------------- config parsing (docs/discover.md, "What is scanned")


def test_D6_config_entry_fields_and_order():
    data = json.dumps(
        {
            "globalShortcut": "x",
            "mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "srv"], "env": {"GITHUB_TOKEN": "s3cret", "MODE": "a"}},
                "guarded": {"command": "/opt/assay", "args": ["mcp", "wrap", "--", "npx", "srv"]},
            },
        }
    ).encode()
    servers, errors = d.parse_config_file(data, CLAUDE)
    assert errors == []
    assert [s["id"] for s in servers] == ["claude_desktop-fs", "claude_desktop-guarded"]
    fs = servers[0]
    assert list(fs) == [
        "id",
        "name",
        "source",
        "transport",
        "status",
        "policy_status",
        "auth",
        "env_vars",
        "risk_hints",
        "wrapped",
    ]
    assert fs["source"] == {"type": "config_file", "path": CLAUDE.path, "client": "claude_desktop"}
    assert fs["transport"] == {"type": "stdio", "command": "npx", "args": ["-y", "srv"]}
    assert (fs["status"], fs["policy_status"], fs["auth"], fs["wrapped"]) == (
        "configured",
        "unmanaged",
        "api_key",
        False,
    )
    assert fs["env_vars"] == ["GITHUB_TOKEN", "MODE"]
    assert "s3cret" not in json.dumps(servers)  # env values are never emitted
    g = servers[1]
    assert (g["policy_status"], g["auth"], g["wrapped"]) == ("managed", "none", True)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"mcpServers": {', "invalid JSON: Expecting property name enclosed in double quotes (line 1, column 17)"),
        (b"\xff\xfe{}", "not valid UTF-8 (byte 0)"),
        (b"[1, 2]", "top level is not a JSON object"),
        (b'{"mcpServers": []}', '"mcpServers" is not an object'),
    ],
)
def test_D30a_malformed_file_is_one_error_entry(data, message):
    servers, errors = d.parse_config_file(data, CLAUDE)
    assert servers == []
    assert errors == [{"path": CLAUDE.path, "client": "claude_desktop", "error": message}]


def test_D5_missing_server_map_is_no_servers_and_no_error():
    assert d.parse_config_file(b'{"theme": "dark"}', CLAUDE) == ([], [])
    assert d.parse_config_file(b"{}", CLAUDE) == ([], [])


def test_D30a_one_bad_entry_keeps_the_others():
    data = json.dumps(
        {
            "mcpServers": {
                "bad": {"args": []},
                "good": {"command": "srv"},
                "worse": 3,
                "env": {"command": "x", "env": []},
            }
        }
    ).encode()
    servers, errors = d.parse_config_file(data, CLAUDE)
    assert [s["name"] for s in servers] == ["good"]
    assert [e["error"] for e in errors] == [
        'server "bad": neither "command" nor "url" is a string',
        'server "worse": entry is not an object',
        'server "env": "env" is not an object of strings',
    ]


def test_vscode_jsonc_servers_key_and_url_servers():
    text = """{
      // user servers
      "servers": {
        "gh": {"type": "http", "url": "https://api.example/mcp", "headers": {"Authorization": "Bearer x"}},
        "events": {"type": "sse", "url": "https://e.example/sse",},
        "local": {"type": "stdio", "command": "node", "args": ["s.js", "// not a comment"]}, /* trailing */
      },
    }"""
    servers, errors = d.parse_config_file(text.encode(), VSCODE)
    assert errors == []
    assert [s["transport"] for s in servers] == [
        {"type": "http", "url": "https://api.example/mcp"},
        {"type": "sse", "url": "https://e.example/sse"},
        {"type": "stdio", "command": "node", "args": ["s.js", "// not a comment"]},
    ]
    assert [s["auth"] for s in servers] == ["api_key", "none", "none"]
    assert all(s["client"] == "vscode" for s in (x["source"] for x in servers))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(json_values, st.booleans())
def test_strip_jsonc_keeps_plain_json_intact(value, pretty):
    text = json.dumps(value, indent=2 if pretty else None)
    assert d.strip_jsonc(text) == text


@given(json_values)
def test_strip_jsonc_removes_comments_and_trailing_commas(value):
    text = json.dumps(value, indent=1)
    commented = "// head\n" + text.replace("\n", " /* c */\n") + "\n// tail"
    assert json.loads(d.strip_jsonc(commented)) == value


# ---------------------------------------------------------------- processes (docs/discover.md; docs/kill.md, "Safety")


def P(pid, ppid, *argv):
    return d.ProcInfo(pid, ppid, tuple(argv), pid * 10, str(1_700_000_000 + pid), "u")


SNAPSHOT = [
    P(1, 0, "/sbin/init"),
    P(50, 1, "node", "/x/@modelcontextprotocol/server-github"),
    P(40, 1, "python", "/v/bin/assay", "mcp", "wrap", "--policy", "p", "--", "npx", "srv"),
    P(41, 40, "npx", "srv"),
    P(42, 41, "node", "/x/mcp-server-srv"),
    P(60, 1, "python", "my_mcp_server.py"),
    P(61, 60, "sleep", "100"),
    P(70, 1, "bash"),
    P(80, 1),  # kernel thread / zombie: no argv
    P(90, 1, "assay", "mcp", "kill", "mcp-server-x"),  # this very process
]


def test_D30a_D31_process_classification():
    found = d.classify_processes(SNAPSHOT, self_pid=90)
    assert [e["id"] for e in found] == ["proc-40", "proc-50", "proc-60"]  # ascending pid
    wrap = found[0]
    assert (wrap["wrapped"], wrap["policy_status"]) == (True, "managed")
    assert wrap["source"] == {
        "type": "running_process",
        "pid": 40,
        "cmdline": "python /v/bin/assay mcp wrap --policy p -- npx srv",
        "started_at": "1700000040",
        "user": "u",
    }
    assert (found[1]["wrapped"], found[1]["policy_status"], found[1]["auth"]) == (False, "unmanaged", "unknown")
    assert found[1]["transport"] == {"type": "unknown"}
    assert list(found[1])[-1] == "wrapped"


def test_D31a_kill_accepts_servers_and_what_wraps_run():
    pids = d.mcp_server_pids(SNAPSHOT, self_pid=90)
    assert pids == {40, 41, 42, 50, 60}


def test_D32_descendants_walk():
    assert d.descendants(SNAPSHOT, 40) == [41, 42]
    assert d.descendants(SNAPSHOT, 60) == [61]
    assert d.descendants(SNAPSHOT, 70) == []
    looped = [P(5, 6, "a"), P(6, 5, "b")]
    assert d.descendants(looped, 5) == [6]


def test_proc_stat_name_with_spaces_and_parens():
    data = b"1234 (a) b (c)) S 77 1234 1234 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 0 0"
    assert d.parse_proc_stat(data) == (77, 98765)
    assert d.parse_proc_stat(b"garbage") is None


# ---------------------------------------------------------------- document, findings (docs/discover.md)


def test_timestamps_use_as_many_subsecond_digits_as_needed():
    s = 1_787_000_000
    assert d.format_rfc3339(s * 10**9) == "2026-08-17T20:53:20Z"
    assert d.format_rfc3339(s * 10**9 + 120_000_000) == "2026-08-17T20:53:20.120Z"
    assert d.format_rfc3339(s * 10**9 + 123_456_000) == "2026-08-17T20:53:20.123456Z"
    assert d.format_rfc3339(s * 10**9 + 123_456_789) == "2026-08-17T20:53:20.123456789Z"
    assert d.format_table_time(s * 10**9 + 5) == "2026-08-17 20:53:20.000000005 UTC"


def _servers(*specs):
    return [{"status": st_, "policy_status": ps, "auth": au} for st_, ps, au in specs]


def test_D8_summary_counts_wrapped_as_managed():
    servers = _servers(
        ("configured", "managed", "none"), ("configured", "unmanaged", "api_key"), ("running", "unmanaged", "unknown")
    )
    assert d.summarize(servers) == {
        "total": 3,
        "configured": 2,
        "running": 1,
        "managed": 1,
        "unmanaged": 2,
        "with_auth": 1,
        "without_auth": 1,
    }


@pytest.mark.parametrize(
    ("fail_on", "settings", "lines", "code"),
    [
        (set(), d.DiscoverySettings(), [], 0),
        ({"unmanaged"}, d.DiscoverySettings(), ["Error: Found 2 unmanaged servers."], 10),
        ({"no_auth"}, d.DiscoverySettings(), ["Error: Found 1 servers without authentication."], 11),
        (
            {"unmanaged", "no_auth"},
            d.DiscoverySettings(),
            ["Error: Found 2 unmanaged servers.", "Error: Found 1 servers without authentication."],
            10,
        ),
        (
            set(),
            d.DiscoverySettings(unmanaged_server="warn", no_auth="fail"),
            ["Warning: Found 2 unmanaged servers.", "Error: Found 1 servers without authentication."],
            11,
        ),
    ],
)
def test_D11_findings(fail_on, settings, lines, code):
    summary = {"unmanaged": 2, "without_auth": 1}
    assert d.evaluate_findings(summary, fail_on, settings) == (lines, code)


def test_D1_fail_on_is_comma_separated_repeatable_unknown_ignored():
    assert d.parse_fail_on(["unmanaged,bogus", " no_auth "]) == {"unmanaged", "bogus", "no_auth"}
    assert d.evaluate_findings({"unmanaged": 0, "without_auth": 0}, {"bogus"}, d.DiscoverySettings()) == ([], 0)


def test_D2_settings_from_policy_block():
    assert d.settings_from_policy(None) == d.DiscoverySettings()
    s = d.settings_from_policy(
        {"enabled": True, "methods": [], "on_findings": {"unmanaged_server": "warn", "no_auth": "log"}}
    )
    assert s == d.DiscoverySettings(True, ("config_files", "processes"), "warn", "log")
    assert d.settings_from_policy({"enabled": False, "methods": ["processes"]}).enabled is False


# ---------------------------------------------------------------- the client table


def test_linux_table_order_and_xdg():
    rows = clients.config_locations("linux", "/h", {"XDG_CONFIG_HOME": "/x", "CODEX_HOME": "/c"}, "/p")
    assert [(r.client, r.path, r.servers_key, r.scope, r.syntax) for r in rows] == [
        ("claude_desktop", "/x/Claude/claude_desktop_config.json", "mcpServers", "user", "json"),
        ("claude_code", "/h/.claude.json", "mcpServers", "user", "json"),
        ("cursor", "/h/.cursor/mcp.json", "mcpServers", "user", "json"),
        ("vscode", "/x/Code/User/mcp.json", "servers", "user", "jsonc"),
        ("windsurf", "/h/.codeium/windsurf/mcp_config.json", "mcpServers", "user", "json"),
        ("gemini_cli", "/h/.gemini/settings.json", "mcpServers", "user", "jsonc"),
        ("codex", "/c/config.toml", "mcp_servers", "user", "toml"),
        ("zed", "/x/zed/settings.json", "context_servers", "user", "jsonc"),
        ("claude_code", "/p/.mcp.json", "mcpServers", "project", "json"),
        ("cursor", "/p/.cursor/mcp.json", "mcpServers", "project", "json"),
        ("vscode", "/p/.vscode/mcp.json", "servers", "project", "jsonc"),
        ("gemini_cli", "/p/.gemini/settings.json", "mcpServers", "project", "jsonc"),
        ("codex", "/p/.codex/config.toml", "mcp_servers", "project", "toml"),
        ("zed", "/p/.zed/settings.json", "context_servers", "project", "jsonc"),
        ("claude_desktop", "/h/.config/claude/claude_desktop_config.json", "mcpServers", "compat", "json"),
        (
            "claude_desktop",
            "/h/Library/Application Support/Claude/claude_desktop_config.json",
            "mcpServers",
            "compat",
            "json",
        ),
        ("generic", "/h/.vscode/mcp-settings.json", "mcpServers", "compat", "json"),
    ]
    # Claude Code's local-scope servers live under projects.<path>.mcpServers of ~/.claude.json
    assert rows[1].nested == (("projects", "*", "mcpServers"),) and rows[8].nested == ()
    # Without CODEX_HOME (or with a relative one) Codex reads ~/.codex
    assert clients.user_config_path("codex", "linux", "/h", {"CODEX_HOME": "rel"}) == "/h/.codex/config.toml"
    # A relative XDG_CONFIG_HOME is invalid per the XDG spec and ignored.
    assert clients.config_locations("linux", "/h", {"XDG_CONFIG_HOME": "rel"}, "/p")[0].path == (
        "/h/.config/Claude/claude_desktop_config.json"
    )


def test_macos_and_windows_rows_are_deduplicated():
    mac = clients.config_locations("macos", "/Users/u", {}, "/p")
    paths = [r.path for r in mac]
    assert paths[0] == "/Users/u/Library/Application Support/Claude/claude_desktop_config.json"
    assert len(paths) == len(set(paths))
    win = clients.config_locations("windows", "C:\\Users\\u", {"APPDATA": "C:\\Users\\u\\AppData\\Roaming"}, "C:\\p")
    assert win[0].path == "C:\\Users\\u\\AppData\\Roaming\\Claude\\claude_desktop_config.json"
    assert [r.path for r in win].count(win[0].path) == 1


def test_F2_user_config_paths():
    env = {"XDG_CONFIG_HOME": "/x"}
    assert clients.user_config_path("claude_desktop", "linux", "/h", env) == "/x/Claude/claude_desktop_config.json"
    assert clients.user_config_path("cursor", "linux", "/h", env) == "/h/.cursor/mcp.json"
    assert clients.user_config_path("cursor", "freebsd", "/h", env) is None
    assert [
        clients.resolve_client(x)
        for x in (
            "Claude",
            "CLAUDE-DESKTOP",
            "claude_desktop",
            "Cursor",
            "VSCode",
            "claude-code",
            "gemini",
            "Codex",
            "zed",
            "windsurf",
            "nope",
        )
    ] == [
        "claude_desktop",
        "claude_desktop",
        "claude_desktop",
        "cursor",
        "vscode",
        "claude_code",
        "gemini_cli",
        "codex",
        "zed",
        "windsurf",
        None,
    ]


# ---------------------------------------------------------------- kill parsing (docs/kill.md: targets, --inventory, --all, --grace)


def test_K1_pid_targets():
    assert k.parse_pid_target("1234") == 1234
    assert k.parse_pid_target("proc-1234") == 1234
    assert k.parse_pid_target("4294967295") == 4294967295
    for token in ("4294967296", "-1", "proc-", "proc-x", "12a", "１２", "+5", " 5", "my-server"):
        assert k.parse_pid_target(token) is None, token


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_K1_every_u32_roundtrips(n):
    assert k.parse_pid_target(str(n)) == n
    assert k.parse_pid_target(f"proc-{n}") == n


def test_K5_grace_durations():
    assert k.parse_grace("5s") == 5.0
    assert k.parse_grace("250ms") == 0.25
    assert k.parse_grace("2") == 2.0
    assert k.parse_grace("1.5s") == 1.5
    for bad in ("", "s", "5m", "-1s", "1e3", "five"):
        with pytest.raises(ValueError):
            k.parse_grace(bad)


INVENTORY = {
    "servers": [
        {
            "id": "claude_desktop-fs",
            "name": "fs",
            "status": "configured",
            "source": {"type": "config_file", "path": "/c", "client": "claude_desktop"},
        },
        {"id": "proc-20", "name": "fs", "status": "running", "source": {"type": "running_process", "pid": 20}},
        {"id": "proc-10", "name": None, "status": "running", "source": {"type": "running_process", "pid": 10}},
        {"id": "proc-30", "name": None, "status": "unknown", "source": {"type": "running_process", "pid": 30}},
        {"id": "proc-10", "name": None, "status": "running", "source": {"type": "running_process", "pid": 10}},
        "junk",
    ]
}


def test_K1_inventory_resolution():
    assert k.resolve_in_inventory(INVENTORY, "proc-10") == 10
    assert k.resolve_in_inventory(INVENTORY, "fs") == 20  # the name's running entry, not the config one
    assert k.resolve_in_inventory(INVENTORY, "claude_desktop-fs") is None  # a config entry has no pid
    assert k.resolve_in_inventory(INVENTORY, "nope") is None


def test_K3_all_takes_running_process_entries_sorted_unique():
    assert k.running_pids(INVENTORY) == [10, 20]


def test_macos_and_windows_rows_of_the_newer_clients():
    mac = {(r.client, r.scope): r.path for r in clients.config_locations("macos", "/Users/u", {}, "/p")}
    assert mac[("zed", "user")] == "/Users/u/.config/zed/settings.json"
    assert mac[("vscode", "user")] == "/Users/u/Library/Application Support/Code/User/mcp.json"
    assert mac[("codex", "user")] == "/Users/u/.codex/config.toml"
    win = {
        (r.client, r.scope): r.path
        for r in clients.config_locations(
            "windows", "C:\\Users\\u", {"APPDATA": "C:\\Users\\u\\AppData\\Roaming", "CODEX_HOME": "D:\\codex"}, "C:\\p"
        )
    }
    assert win[("zed", "user")] == "C:\\Users\\u\\AppData\\Roaming\\Zed\\settings.json"
    assert win[("windsurf", "user")] == "C:\\Users\\u\\.codeium\\windsurf\\mcp_config.json"
    assert win[("codex", "user")] == "D:\\codex\\config.toml"
    assert win[("claude_code", "project")] == "C:\\p\\.mcp.json"
