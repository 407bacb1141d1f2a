"""No output of `assay mcp protect` holds a value the docs say is never printed (docs/protect.md,
"Remote servers" and "Output and exit codes"): header values (and every other string under a
server entry's ``headers``, ``http_headers``, ``env`` or Codex's ``bearer_token``) stay out of
the dry run's diff, the summary, the errors and undo's output, in JSON, JSON with comments and
TOML, whatever the value holds.

Each value is drawn by hypothesis (secret-shaped, or arbitrary text) and framed by two marker
words; every run of protect is the real command (``assay.cli.app.main``), and none of its stdout
or stderr may hold a marker, the value, or the value as the file spells it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.cli.app import main
from assay.clients.protect.tomltext import toml_string

HEAD, TAIL = "Qz7head", "Qz7tail"

SECRETS = st.one_of(
    st.from_regex(r"Bearer sk-(proj-|ant-)?[A-Za-z0-9_-]{20,40}", fullmatch=True),
    st.from_regex(r"(ghp|hf|xoxb)_[A-Za-z0-9]{24,36}", fullmatch=True),
    st.sampled_from(
        [
            "${input:api-key}",
            "${env:TOKEN}",
            "Bearer ${TOKEN}",
            "a\"b\\c'd",
            "# not a comment",
            "\u2028line\u2029",
            "\x7f\x1b[31m",
            '}, "x": {',
            "= 'x' ]",
        ]
    ),
)
ARBITRARY = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\n\x00"), max_size=24)
VALUES = st.lists(st.one_of(SECRETS, ARBITRARY).map(lambda v: f"{HEAD}{v}{TAIL}"), min_size=1, max_size=3)


def _json_config(values: list[str], comments: bool, key: str) -> str:
    headers = ", ".join(
        f"{json.dumps(f'X-H{i}')}: {json.dumps(v, ensure_ascii=i % 2 == 0)}" for i, v in enumerate(values)
    )
    note = "    // the team's server\n" if comments else ""
    trail = "," if comments else ""
    return (
        "{\n"
        f'  "{key}": {{\n'
        f'{note}    "remote": {{"url": "https://mcp.example.com/mcp", "headers": {{{headers}}}}},\n'
        f'    "ws": {{"url": "wss://mcp.example.com/ws", "headers": {{"A": {json.dumps(values[0])}}}}},\n'
        f'    "local": {{"command": "npx", "args": ["-y", "srv"], "env": {{"TOKEN": {json.dumps(values[-1])}}}}}{trail}\n'
        "  }\n"
        "}\n"
    )


def _toml_value(value: str, i: int) -> str:
    plain = all(c not in value for c in "'\x7f") and all(ord(c) >= 0x20 or c == "\t" for c in value)
    return f"'{value}'" if plain and i % 2 else toml_string(value)


def _toml_config(values: list[str]) -> str:
    headers = ", ".join(f'"X-H{i}" = {_toml_value(v, i)}' for i, v in enumerate(values))
    return (
        'model = "m"\n\n'
        "[mcp_servers.remote]\n"
        'url = "https://mcp.example.com/mcp"  # remote\n'
        f"http_headers = {{ {headers} }}\n\n"
        "[mcp_servers.ws]\n"
        'url = "wss://mcp.example.com/ws"\n'
        f"http_headers = {{ A = {_toml_value(values[0], 0)} }}\n\n"
        "[mcp_servers.local]\n"
        'command = "npx"\n'
        "[mcp_servers.local.env]\n"
        f"TOKEN = {_toml_value(values[-1], 1)}\n"
    )


CASES = [
    ("cursor", "mcp.json", lambda v: _json_config(v, False, "mcpServers")),
    ("vscode", "mcp.json", lambda v: _json_config(v, True, "servers")),
    ("codex", "config.toml", _toml_config),
]


def _run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


def _spellings(value: str) -> set[str]:
    """How a value may show: as it is, and as JSON and TOML write it."""
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], toml_string(value)[1:-1]}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), values=VALUES)
def test_no_output_of_protect_shows_a_header_or_env_value(case, values):
    client, name, render = case
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = root / name
        text = render(values)
        config.write_text(text, encoding="utf-8")
        policy = root / "policy.yaml"
        policy.write_text('version: "2.0"\n')
        other = root / "other.yaml"
        other.write_text('version: "2.0"\n')
        old = os.environ.get("ASSAY_STATE_DIR")
        os.environ["ASSAY_STATE_DIR"] = str(root / "state")
        try:
            base = ("mcp", "protect", client, "--config", str(config))
            outputs = []
            for argv, code in [
                ((*base, "--policy", str(policy), "--dry-run"), 0),
                ((*base, "--policy", str(policy)), 0),
                ((*base, "--policy", str(other), "--dry-run"), 0),
                ((*base, "--policy", str(other)), 0),
                ((*base, "--undo", "--dry-run"), 0),
                ((*base, "--undo"), 0),
            ]:
                got, output = _run(*argv)
                assert got == code, output
                outputs.append(output)
            assert config.read_text(encoding="utf-8") == text
            # a remote entry edited after protect: undo keeps it and says what it ran before
            assert _run(*base, "--policy", str(policy))[0] == 0
            protected = config.read_text(encoding="utf-8")
            edited = (
                protected.replace("[mcp_servers.remote]\n", "[mcp_servers.remote]\ntimeout = 5\n")
                if name.endswith(".toml")
                else protected.replace('"remote": {', '"remote": {"timeout": 5, ')
            )
            assert edited != protected
            config.write_text(edited, encoding="utf-8")
            for argv, action in (
                ((*base, "--undo"), "kept     "),
                ((*base, "--undo", "--force"), "kept     " if name.endswith(".toml") else "unwrapped"),
            ):
                got, output = _run(*argv)
                assert got == 0 and f'{action} "remote"' in output, output
                outputs.append(output)
            config.write_text(
                text.replace("https://mcp.example.com/mcp", "https://mcp.example.com/mcp\u0000"), encoding="utf-8"
            )
            outputs.append(_run(*base, "--policy", str(policy))[1])  # refused: the error line
        finally:
            if old is None:
                os.environ.pop("ASSAY_STATE_DIR", None)
            else:
                os.environ["ASSAY_STATE_DIR"] = old
    shown = "\n".join(outputs)
    assert "<hidden>" in outputs[0]
    assert HEAD not in shown and TAIL not in shown
    for value in values:
        for spelling in _spellings(value):
            assert spelling not in shown
