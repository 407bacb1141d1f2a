"""Byte-exact protect and undo in every client's file format (docs/protect.md, "Formatting and
comments" and "Formats"): Codex TOML edited in place by spans, VS Code JSONC comments and
trailing commas, Gemini CLI settings with comments, Zed's older entry form; and a property test
of protect then undo = identity over generated entries in JSON, JSONC and TOML."""

from __future__ import annotations

import json
import tomllib

from hypothesis import given, settings
from hypothesis import strategies as st

from assay import clients
from assay import discover as d
from assay.clients import protect as p

OPTS = p.WrapOptions("/opt/venv/bin/assay", "/home/u/.config/assay/policy.yaml", "/home/u/logs")


def location(label: str) -> clients.ConfigLocation:
    return clients.client_locations(label, "linux", "/home/u", {}, "/w")[0]


def round_trip(text: str, label: str) -> p.Result:
    loc = location(label)
    result = p.protect_text(text, loc, OPTS)
    servers, errors = d.parse_config_file(result.text.encode(), loc)
    assert errors == []
    assert all(s["wrapped"] for s in servers if s["transport"]["type"] == "stdio")
    assert p.undo_text(result.text, loc, result.record).text == text
    return result


CODEX = """\
# ~/.codex/config.toml
[mcp_servers.context7]
command = 'npx'  # the launcher
args = [
  '-y',  # no prompt
  "@upstash/context7-mcp", # the server
]
env = { MY_ENV_VAR = 'MY_ENV_VALUE' }

[mcp_servers."my docs"]
command = "docs-server"
startup_timeout_sec = 20
"""


def test_codex_multiline_args_keep_their_comments_and_literal_strings():
    result = round_trip(CODEX, "codex")
    out = result.text
    assert 'command = "/opt/venv/bin/assay"  # the launcher\n' in out
    assert '  "npx",\n  \'-y\',  # no prompt\n  "@upstash/context7-mcp", # the server\n]\n' in out
    assert "env = { MY_ENV_VAR = 'MY_ENV_VALUE' }" in out
    assert [c.detail for c in result.changes if c.name == "context7"] == ["npx -y @upstash/context7-mcp"]
    doc = tomllib.loads(out)["mcp_servers"]
    assert doc["my docs"]["args"][-2:] == ["--", "docs-server"]
    assert doc["my docs"]["startup_timeout_sec"] == 20
    # the entry without args gets a line of its own, after the command's line
    assert 'command = "/opt/venv/bin/assay"\nargs = ["mcp", "wrap",' in out


def test_codex_dotted_keys_inline_tables_and_crlf_round_trip():
    for text in (
        "mcp_servers.a.command = 'x' # c\nmcp_servers.b.command = \"y\"\nmcp_servers.b.args = []\n",
        "mcp_servers = { a = { command = 'x' }, b = { command = \"y\", args = ['1'] } }\n",
        "[mcp_servers]\na = { command = 'x', env = { K = 'v' } }\r\n[mcp_servers.b]\r\ncommand = 'y' # c\r\n",
    ):
        result = round_trip(text, "codex")
        assert {c.name for c in result.changes if c.action == "wrapped"} == {"a", "b"}


VSCODE = """\
{
  "servers": {
    "fetch": {
      "type": "stdio",
      "command": "uvx",
      "args": [
        "mcp-server-fetch", // the server
        "--ignore-robots-txt", /* for tests */
      ],
    },
    "bare": {
      "command": "my-server" // no args
    },
    "empty": {"command": "x", "args": [ /* none yet */ ]},
  },
}
"""


def test_vscode_comments_and_trailing_commas_survive_and_come_back_exactly():
    result = round_trip(VSCODE, "vscode")
    out = result.text
    assert (
        '        "uvx",\n        "mcp-server-fetch", // the server\n        "--ignore-robots-txt", /* for tests */\n      ],'
        in out
    )
    details = {c.name: c.detail for c in result.changes}
    assert details["fetch"] == "uvx mcp-server-fetch --ignore-robots-txt"
    # a comment that cannot be kept is said to be dropped (and undo puts it back)
    assert details["empty"] == 'x (the comments inside its "args" array are dropped; undo puts them back)'
    assert "/* none yet */" not in out
    undone = p.undo_text(out, location("vscode"), result.record).text
    assert '"bare": {\n      "command": "my-server" // no args\n    }' in undone


def test_gemini_settings_with_comments_are_read_as_jsonc():
    # Gemini CLI strips comments when it loads settings.json (docs/protect.md, "Formats")
    text = (
        '{\n  // my settings\n  "theme": "GitHub",\n  /* servers */\n  "mcpServers": {\n'
        '    "py": {"command": "python", "args": ["-m", "srv"]} // local\n  }\n}\n'
    )
    assert location("gemini_cli").jsonc
    result = round_trip(text, "gemini_cli")
    assert [c.action for c in result.changes] == ["wrapped"]
    assert "// my settings" in result.text and "// local" in result.text


ZED_OLD = """\
// Zed settings
{
  "context_servers": {
    "old-style": {
      "command": {
        "path": "some-command",
        "args": ["arg-1", "arg-2"],
        "env": {"TOKEN": "x"}
      },
      "settings": {}
    },
    "old-no-args": {"command": {"path": "/usr/bin/srv"}},
    "new-style": {"command": "other", "args": []},
  }
}
"""


def test_zed_older_entry_form_is_wrapped_and_undone_exactly():
    result = round_trip(ZED_OLD, "zed")
    assert {c.name: c.action for c in result.changes} == {
        "old-style": "wrapped",
        "old-no-args": "wrapped",
        "new-style": "wrapped",
    }
    doc = json.loads(d.strip_jsonc(result.text))["context_servers"]
    assert doc["old-style"]["command"]["path"] == OPTS.assay
    assert doc["old-style"]["command"]["args"][-3:] == ["some-command", "arg-1", "arg-2"]
    assert doc["old-style"]["command"]["env"] == {"TOKEN": "x"} and doc["old-style"]["settings"] == {}
    assert doc["old-no-args"]["command"]["args"][-2:] == ["--", "/usr/bin/srv"]
    # discover sees the older form, wrapped or not
    servers, errors = d.parse_config_file(ZED_OLD.encode(), location("zed"))
    assert errors == [] and {s["name"]: s["transport"]["command"] for s in servers}["old-style"] == "some-command"
    assert {s["name"]: s["env_vars"] for s in servers}["old-style"] == ["TOKEN"]


# ---------------------------------------------------------------------------------------------
# protect then undo = identity, over generated entries and layouts

_token = st.text(st.characters(blacklist_categories=("Cs",)), max_size=10)
_word = _token.filter(lambda s: s.strip() != "" and "assay" not in s.lower())
_entry = st.fixed_dictionaries(
    {"command": _word, "args": st.one_of(st.none(), st.lists(_word, max_size=4))},
    optional={"env": st.dictionaries(_token, _token, max_size=2)},
)
_servers = st.dictionaries(_token, _entry, min_size=1, max_size=4)


def _json_text(servers, key: str, indent: str, multiline: bool, comments: bool) -> str:
    dump = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    nl = "\n" if indent else " "
    out = ["{", f'{indent}"other": [1, {{"a": null}}],', f"{indent}{dump(key)}: {{"]
    if comments:
        out.insert(1, f"{indent}// a comment line")
    for n, (name, entry) in enumerate(servers.items()):
        members = [f'"command": {dump(entry["command"])}']
        if entry["args"] is not None:
            items = [dump(a) for a in entry["args"]]
            if multiline and items:
                i2 = indent * 4
                lines = [f"{i2}{item}," + (" // c" if comments else "") for item in items]
                if not comments:
                    lines[-1] = lines[-1].rstrip(",")
                members.append('"args": [' + nl + nl.join(lines) + nl + indent * 3 + "]")
            else:
                members.append('"args": [' + ", ".join(items) + ("," if comments and items else "") + "]")
        if "env" in entry:
            members.append(f'"env": {dump(entry["env"])}')
        sep = "," + nl + indent * 3
        tail = "," if n < len(servers) - 1 else ""
        out.append(f"{indent * 2}{dump(name)}: {{{nl}{indent * 3}" + sep.join(members) + f"{nl}{indent * 2}}}{tail}")
    out.append(f"{indent}}}")
    out.append("}")
    return ("\n" if indent else " ").join(out) + "\n"


def toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")  # a TOML basic string


def _toml_str(value: str, literal: bool) -> str:
    ok = literal and "'" not in value and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)
    return f"'{value}'" if ok else toml_string(value)


def _toml_text(servers, multiline: bool, literal: bool, comments: bool) -> str:
    out = ['model = "m"', ""]
    for name, entry in servers.items():
        out.append(f"[mcp_servers.{toml_string(name)}]")
        out.append(f"command = {_toml_str(entry['command'], literal)}" + ("  # launcher" if comments else ""))
        if entry["args"] is not None:
            items = [_toml_str(a, literal) for a in entry["args"]]
            if multiline and items:
                out.append("args = [\n" + "\n".join(f"  {i}," + (" # c" if comments else "") for i in items) + "\n]")
            else:
                out.append("args = [" + ", ".join(items) + "]")
        if "env" in entry:
            out.append(
                "env = { "
                + ", ".join(f"{toml_string(k)} = {_toml_str(v, literal)}" for k, v in entry["env"].items())
                + " }"
            )
        out.append("")
    return "\n".join(out)


@settings(max_examples=120, deadline=None)
@given(
    servers=_servers,
    label=st.sampled_from(["claude_desktop", "vscode", "zed", "gemini_cli", "codex"]),
    indent=st.sampled_from(["", "  ", "\t"]),
    multiline=st.booleans(),
    style=st.booleans(),
    crlf=st.booleans(),
)
def test_protect_then_undo_is_the_identity_in_every_format(servers, label, indent, multiline, style, crlf):
    loc = location(label)
    if loc.toml:
        text = _toml_text(servers, multiline, literal=style, comments=style)
    else:
        text = _json_text(servers, loc.servers_key, indent, multiline, comments=style and loc.jsonc and indent != "")
    if crlf:
        text = text.replace("\n", "\r\n")
    result = p.protect_text(text, loc, OPTS)
    assert sorted(c.name for c in result.changes if c.action == "wrapped") == sorted(servers)
    undone = p.undo_text(result.text, loc, result.record)
    assert undone.text == text
    assert sorted(c.name for c in undone.changes if c.action == "unwrapped") == sorted(servers)
