"""The sans-IO core of `assay mcp protect`: per-client configs in, new config text out."""

from __future__ import annotations

import json
import tomllib

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from assay import clients
from assay import discover as d
from assay.clients import protect as p
from tests.protect._configs import CASES, CLAUDE_DESKTOP, CODEX, REMOTE_LEFT, VSCODE, ZED

OPTS = p.WrapOptions("/opt/venv/bin/assay", "/home/u/.config/assay/policy.yaml")


def location(label: str, scope: str = "user") -> clients.ConfigLocation:
    rows = clients.client_locations(label, "linux", "/home/u", {}, "/home/u/dev/my-app")
    return next(r for r in rows if r.scope == scope)


def parsed(text: str, loc: clients.ConfigLocation):
    if loc.toml:
        return tomllib.loads(text)
    return json.loads(d.strip_jsonc(text) if loc.jsonc else text)


def entries(doc, loc):
    out = {}
    for _, table in clients.server_maps(doc, loc):
        out.update(table)
    return out


@pytest.mark.parametrize("label,scope,text,stdio,remote", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_every_client_protect_wraps_stdio_servers_keeps_the_rest_and_undo_restores(label, scope, text, stdio, remote):
    loc = location(label, scope)
    result = p.protect_text(text, loc, OPTS)
    actions = {c.name: c.action for c in result.changes}
    skipped = [n for n in remote if (label, n) in REMOTE_LEFT]
    remote_wrapped = [n for n in remote if (label, n) not in REMOTE_LEFT]
    assert actions == {**{n: "wrapped" for n in stdio + remote_wrapped}, **{n: "skipped" for n in skipped}}

    before, after = parsed(text, loc), parsed(result.text, loc)
    old, new = entries(before, loc), entries(after, loc)
    for name in stdio:
        argv = [old[name]["command"], *old[name].get("args", [])]
        assert new[name]["command"] == OPTS.assay
        assert new[name]["args"] == ["mcp", "wrap", "--policy", OPTS.policy, "--label", name, "--", *argv]
        # every other member of the entry is kept as it was
        assert {k: v for k, v in new[name].items() if k not in ("command", "args")} == {
            k: v for k, v in old[name].items() if k not in ("command", "args")
        }
    for name in skipped:
        assert new[name] == old[name]
    # settings outside the server maps are untouched
    strip = lambda doc: {k: v for k, v in doc.items() if k not in (loc.servers_key, "projects")}  # noqa: E731
    assert strip(after) == strip(before)

    # discover reads the protected file as the client would, and sees every stdio server wrapped
    servers, errors = d.parse_config_file(result.text.encode(), loc)
    assert errors == []
    assert {s["name"]: s["wrapped"] for s in servers} == {
        **{n: True for n in stdio + remote_wrapped},
        **{n: False for n in skipped},
    }

    again = p.protect_text(result.text, loc, OPTS)
    assert again.text == result.text and not again.changed

    undone = p.undo_text(result.text, loc, result.record)
    assert {c.name for c in undone.changes if c.action == "unwrapped"} == set(stdio + remote_wrapped)
    # byte for byte, also for an entry that had no "args" (docs/protect.md, "Undo")
    assert undone.text == text


def test_comments_of_jsonc_clients_are_kept_byte_for_byte():
    for text, label in ((VSCODE, "vscode"), (ZED, "zed")):
        out = p.protect_text(text, location(label), OPTS).text
        for line in text.splitlines():
            if line.strip().startswith("//"):
                assert line in out.splitlines()


def test_toml_comments_and_other_tables_are_kept():
    out = p.protect_text(CODEX, location("codex"), OPTS).text
    assert out.startswith('# ~/.codex/config.toml\nmodel = "gpt-5-codex"\n')
    assert 'MY_ENV_VAR = "MY_ENV_VALUE"  # passed to the server' in out
    doc = tomllib.loads(out)
    assert doc["mcp_servers"]["docs"]["startup_timeout_sec"] == 20
    assert doc["mcp_servers"]["context7"]["env"] == {"MY_ENV_VAR": "MY_ENV_VALUE"}


@pytest.mark.parametrize(
    "text",
    [
        'mcp_servers = { a = { command = "x", args = ["1"] } }\n',
        'mcp_servers.a.command = "x"\nmcp_servers.a.args = ["1"]\n',
        '[mcp_servers]\na = { command = "x", args = ["1"], env = { K = "v" } }\n',
    ],
)
def test_toml_inline_tables_and_dotted_keys(text):
    loc = location("codex")
    result = p.protect_text(text, loc, OPTS)
    assert tomllib.loads(result.text)["mcp_servers"]["a"]["args"][-3:] == ["--", "x", "1"]
    assert p.undo_text(result.text, loc, result.record).text == text


def test_log_dir_adds_decision_and_audit_logs_with_an_event_source():
    opts = p.WrapOptions("/bin/assay", "/p.yaml", log_dir="/var/log/assay")
    args = p.wrapped_args("my-server.1", "npx", ["-y", "x"], opts)
    assert args == [
        "mcp",
        "wrap",
        "--policy",
        "/p.yaml",
        "--label",
        "my-server.1",
        "--event-source",
        "assay://protect/my-server.1",
        "--decision-log",
        "/var/log/assay/my-server.1.decisions.ndjson",
        "--audit-log",
        "/var/log/assay/my-server.1.audit.ndjson",
        "--",
        "npx",
        "-y",
        "x",
    ]
    assert p.unwrap_args("/bin/assay", args) == ("npx", ["-y", "x"])


def test_a_name_that_is_not_a_plain_file_name_gets_a_digest_in_its_log_names():
    opts = p.WrapOptions("/bin/assay", "/p.yaml", log_dir="/var/log/assay")
    args = p.wrapped_args("my server/1", "npx", [], opts)
    slug = args[args.index("--event-source") + 1].removeprefix("assay://protect/")
    assert slug.startswith("my-server-1-") and len(slug) == len("my-server-1-") + 8
    assert args[args.index("--decision-log") + 1] == f"/var/log/assay/{slug}.decisions.ndjson"


_names = st.one_of(
    st.sampled_from(
        [
            "a",
            "A",
            "my server",
            "my-server",
            "my_server",
            "--",
            "-",
            "",
            ".",
            "..",
            "-x",
            "x-",
            "GitHub",
            "github",
            "my-server-b129874b",
            "ü",
            "u",
        ]
    ),
    st.text(max_size=8),
)


@settings(max_examples=300, deadline=None)
@given(a=_names, b=_names)
def test_two_server_names_never_share_a_log_file(a, b):
    # not even on a file system that ignores case (macOS, Windows)
    if a != b:
        assert p._slug(a).lower() != p._slug(b).lower()
    assert p._slug(a) == p._slug(a) and "/" not in p._slug(a) and p._slug(a) not in ("", ".", "..")


@pytest.mark.parametrize("name", ["--", "-", "-x", "--policy", "--dry-run", "--label", "", " ", "a=b", "--label=x"])
@pytest.mark.parametrize("log_dir", [None, "/var/log/assay"])
def test_wrap_reads_the_line_protect_wrote_for_any_server_name(monkeypatch, name, log_dir):
    """The entry protect writes runs: wrap's own parser reads back the name as --label and the
    server command unchanged, even for a name that looks like an option or the separator."""
    from tests.test_wrap_args import outcome

    args = p.wrapped_args(name, "npx", ["--", "-y", "--label", "x"], p.WrapOptions("/bin/assay", "/p.yaml", log_dir))
    for fast in (True, False):
        code, _, err, runs = outcome(monkeypatch, args[2:], fast)
        assert (code, err) == (0, "")
        (config,) = runs
        assert config.label == name and config.policy_path == "/p.yaml"
        assert config.argv == ["npx", "--", "-y", "--label", "x"]
        if log_dir:
            assert config.decision_log and config.decision_log.startswith("/var/log/assay/")
    assert p.unwrap_args("/bin/assay", args) == ("npx", ["--", "-y", "--label", "x"])


def test_undo_reads_an_entry_an_older_protect_wrote_for_a_name_like_the_separator():
    args = ["mcp", "wrap", "--policy", "/p.yaml", "--label", "--", "--", "0", "x"]
    assert p.unwrap_args("/bin/assay", args) == ("0", ["x"])


_token = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    name=_token, command=_token.filter(lambda s: s.strip() != ""), args=st.lists(_token, max_size=6), log=st.booleans()
)
def test_wrapped_args_always_unwrap_to_the_original_command_line(name, command, args, log):
    # arguments that look like options, or are "--" themselves, survive: they follow the first "--"
    opts = p.WrapOptions("/x/assay", "/p.yaml", "/logs" if log else None)
    assert p.unwrap_args("/x/assay", p.wrapped_args(name, command, args, opts)) == (command, args)


@settings(max_examples=150, deadline=None)
@given(
    servers=st.dictionaries(
        _token,
        st.fixed_dictionaries(
            {
                "command": _token.filter(lambda s: s.strip() != "" and "assay" not in s.lower()),
                "args": st.lists(_token.filter(lambda s: "assay" not in s.lower()), max_size=4),
            },
            optional={"env": st.dictionaries(_token, _token, max_size=2)},
        ),
        max_size=4,
    ),
    indent=st.sampled_from([None, 2, 4, "\t"]),
    label=st.sampled_from(["claude_desktop", "cursor", "vscode", "gemini_cli", "zed", "codex"]),
)
@example(servers={"--": {"command": "0", "args": []}}, indent=None, label="claude_desktop")
@example(servers={"-x": {"command": "--", "args": ["--"]}}, indent=2, label="codex")
def test_protect_then_undo_is_the_identity(servers, indent, label):
    loc = location(label)
    if loc.toml:
        import tomlkit

        text = tomlkit.dumps({loc.servers_key: servers})
    else:
        text = json.dumps({"other": [1, {"a": None}], loc.servers_key: servers}, indent=indent, ensure_ascii=False)
    if loc.jsonc and indent is not None:
        # comments on their own lines and after members, as people write them in VS Code and Zed
        # (not inside an "args" array: those are documented to be dropped when it is replaced)
        text = "// top comment\n" + "\n".join(
            line + (" // after" if line.rstrip().endswith(("},", "],")) else "") for line in text.split("\n")
        ).replace("{\n", "{\n  /* block\n  comment */\n", 1)
    result = p.protect_text(text, loc, OPTS)
    assert entries(parsed(result.text, loc), loc).keys() == servers.keys()
    assert all(c.action == "wrapped" for c in result.changes)
    assert p.undo_text(result.text, loc, result.record).text == text


@pytest.mark.parametrize(
    "label,text,message",
    [
        ("claude_desktop", '{"mcpServers": {}, // no comments here\n}', "invalid JSON"),
        ("claude_desktop", '{"mcpServers": {"a": {"command": "x"}}, "mcpServers": {}}', "duplicate key"),
        ("cursor", "[1, 2]", "top level is not a JSON object"),
        ("cursor", '{"mcpServers": ["a"]}', '"mcpServers" is not an object'),
        ("vscode", '{"servers": {"a": {"command": "x"}}', "invalid JSON"),
        ("codex", "[mcp_servers.a\ncommand = 1", "invalid TOML"),
        ("gemini_cli", '{"mcpServers": {"a": {"command": "x", "args": [NaN]}}}', "NaN is not JSON"),
        ("claude_desktop", "[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
)
def test_unparsable_or_odd_configs_are_refused(label, text, message):
    with pytest.raises(p.ProtectError, match=message):
        p.protect_text(text, location(label), OPTS)


def test_odd_entries_are_skipped_with_a_reason_and_left_byte_for_byte():
    text = json.dumps(
        {
            "mcpServers": {
                "list": ["npx"],
                "num": {"command": 3},
                "badargs": {"command": "npx", "args": "-y x"},
                "sse": {"type": "sse", "command": "x", "url": "http://h/sse"},
                "shim": {"command": "sh", "args": ["-c", "assay mcp wrap --policy p -- npx x"]},
                "py": {
                    "command": "/v/bin/python3",
                    "args": ["/v/bin/assay", "mcp", "wrap", "--policy", "p", "--", "npx", "x"],
                },
                "ok": {"command": "npx", "args": ["x"]},
            }
        },
        indent=2,
    )
    result = p.protect_text(text, location("claude_desktop"), OPTS)
    reasons = {c.name: (c.action, c.detail) for c in result.changes}
    assert reasons["list"] == ("skipped", "entry is not an object; left as is")
    assert reasons["badargs"][1] == '"args" is not a list of strings; left as is'
    assert reasons["sse"][1].startswith('"type" is "sse"')
    # a shell string is never wrapped, whatever it says (docs/protect.md, "Which entries are wrapped")
    assert reasons["shim"][0] == "wrapped"
    assert reasons["py"][0] == "skipped" and reasons["py"][1].startswith("already runs under assay mcp wrap")
    assert reasons["ok"][0] == "wrapped"
    undone = p.undo_text(result.text, location("claude_desktop"), result.record)
    assert undone.text == text
    # the record decides: the shell string protect wrapped comes back, the interpreter line is not protect's
    assert {c.name: c.action for c in undone.changes}["shim"] == "unwrapped"
    assert {c.name: c.detail for c in undone.changes}["py"] == "not wrapped by assay mcp protect (left as it is)"
    # without a record, only a line protect writes is given back (docs/protect.md, "Undo")
    fallback = p.undo_text(result.text, location("claude_desktop"), None)
    assert {c.name: c.action for c in fallback.changes}["shim"] == "unwrapped"
    assert {c.name: c.detail for c in fallback.changes}["py"].startswith("runs assay mcp wrap in a form")


def test_a_file_without_the_server_map_has_nothing_to_change():
    text = '{\n  "theme": "dark"\n}\n'
    result = p.protect_text(text, location("gemini_cli"), OPTS)
    assert result.text == text and result.changes == [] and not result.changed


def test_entry_without_args_gets_them_in_the_entrys_own_layout():
    result = p.protect_text(
        CLAUDE_DESKTOP.replace(
            '"github": {\n      "command": "npx",\n      "args": ["-y", "@modelcontextprotocol/server-github"],',
            '"github": {\n      "command": "gh-mcp",',
        ),
        location("claude_desktop"),
        OPTS,
    )
    assert '      "command": "/opt/venv/bin/assay",\n      "args": [\n        "mcp",' in result.text
    json.loads(result.text)


def test_a_utf8_bom_is_kept():
    text = "\ufeff" + CLAUDE_DESKTOP
    result = p.protect_text(text, location("claude_desktop"), OPTS)
    assert (
        result.text.startswith("\ufeff{")
        and p.undo_text(result.text, location("claude_desktop"), result.record).text == text
    )


@settings(max_examples=50, deadline=None)
@given(
    tool=st.text(max_size=20), arguments=st.one_of(st.none(), st.dictionaries(st.text(max_size=5), st.text(max_size=5)))
)
def test_the_starter_policy_loads_without_warnings_and_allows_every_tool(tool, arguments):
    from assay.policy import evaluate, load_policy

    warnings: list[str] = []
    policy = load_policy(p.STARTER_POLICY.encode(), source="starter.yaml", warn=warnings.append)
    assert warnings == []
    decision = evaluate(policy, tool, arguments)
    assert decision.outcome in ("allow", "allow_with_warning"), decision.reason


def test_pick_location_by_scope_or_explicit_file():
    pick = lambda *a: clients.pick_location(*a, "linux", "/home/u", {}, "/w")  # noqa: E731
    assert pick("cursor", "user", None).path == "/home/u/.cursor/mcp.json"
    assert pick("cursor", "project", None).path == "/w/.cursor/mcp.json"
    other = pick("claude_code", "user", "/x/.claude.json")
    assert (other.path, other.nested, other.syntax) == ("/x/.claude.json", (("projects", "*", "mcpServers"),), "json")
    assert pick("claude_code", "user", "/x/team.json").nested == ()
    assert pick("zed", "user", "/x/settings.json").syntax == "jsonc"
    assert pick("codex", "user", "/x/c.toml").toml
    with pytest.raises(ValueError, match="Claude Desktop has no project config; use --scope user, or --config FILE"):
        pick("claude_desktop", "project", None)


def test_comments_inside_a_wrapped_args_array_are_kept_and_undo_restores_them():
    # docs/protect.md, "Formatting and comments": the wrap line goes in front of the items
    text = '{\n  "servers": {\n    "a": {\n      "command": "x",\n      "args": [\n        "1", // one\n        "2",\n      ]\n    }\n  }\n}\n'
    result = p.protect_text(text, location("vscode"), OPTS)
    assert result.changes[0].detail == "x 1 2"
    assert '        "x",\n        "1", // one\n        "2",\n      ]' in result.text
    assert p.undo_text(result.text, location("vscode"), result.record).text == text
