"""The one reader of wrap lines, assay.clients.wrapped (docs/protect.md, "Which entries are
wrapped"): words never make an entry wrapped; the lines protect writes always read back; what
the reader accepts, wrap starts with the same values."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from assay import clients
from assay import discover as d
from assay.clients import protect as p
from assay.cli import wrap_args
from assay.wrap.options import BY_FIELD, WRAP_OPTIONS
from assay.clients.wrapped import parse_wrap_options, parse_wrapped
from tests.test_wrap_args import command_lines, outcome, plain_lines

CLAUDE = clients.client_locations("claude_desktop", "linux", "/h", {}, "/w")[0]
OPTS = p.WrapOptions("/opt/venv/bin/assay", "/p.yaml")

#: Servers whose arguments *say* "assay mcp wrap" but do not run under it.
WORDS = {
    "motd": {"command": "npx", "args": ["-y", "some-mcp-server", "--motd", "works with assay mcp wrap"]},
    "words": {"command": "python3", "args": ["server.py", "assay", "mcp", "wrap"]},
    "shell": {"command": "sh", "args": ["-c", "echo assay mcp wrap >/dev/null; exec python3 server.py"]},
}


def test_servers_that_mention_wrap_are_wrapped_by_protect():
    text = json.dumps({"mcpServers": WORDS}, indent=2)
    result = p.protect_text(text, CLAUDE, OPTS)
    assert {c.name: c.action for c in result.changes} == {"motd": "wrapped", "words": "wrapped", "shell": "wrapped"}
    for name, entry in json.loads(result.text)["mcpServers"].items():
        line = parse_wrapped([entry["command"], *entry["args"]])
        assert line is not None and line.server == [WORDS[name]["command"], *WORDS[name]["args"]]
        assert line.options["label"] == name
    assert p.undo_text(result.text, CLAUDE).text == text


def test_servers_that_mention_wrap_are_unmanaged_in_discover():
    servers, errors = d.parse_config_file(json.dumps({"mcpServers": WORDS}).encode(), CLAUDE)
    assert errors == []
    assert [(s["name"], s["wrapped"], s["policy_status"]) for s in servers] == [
        ("motd", False, "unmanaged"),
        ("words", False, "unmanaged"),
        ("shell", False, "unmanaged"),
    ]


@pytest.mark.parametrize(
    "args",
    [
        ["mcp", "wrap", "--policy", "p.yaml", "npx", "x"],  # no "--"
        ["mcp", "wrap", "--policy", "p.yaml", "--"],  # nothing after it
        ["mcp", "wrap", "--bogus", "--", "npx"],  # unknown option
        ["mcp", "wrap", "--policy", "--", "npx"],  # missing value (wrap reads it so too)
        ["mcp", "wrap", "--label", "-x", "--", "npx"],
        ["mcp", "wrap", "--policy", "a", "--policy", "b", "--", "npx"],  # repeated
        ["mcp", "wrap", "--dry-run=yes", "--", "npx"],
        ["mcp", "wrap", "--max-frame-bytes", "0", "--", "npx"],
        ["mcp", "wrap", "--max-frame-bytes", "lots", "--", "npx"],
        ["mcp", "wrap", "stray", "--", "npx"],
        ["mcp", "wrapper", "--", "npx"],
        ["wrap", "--", "npx"],
    ],
)
def test_what_is_not_a_wrap_line(args):
    assert parse_wrapped(["/bin/assay", *args]) is None


def test_the_options_and_the_server_are_read():
    line = parse_wrapped(
        [
            "C:\\bin\\ASSAY.EXE",
            "mcp",
            "wrap",
            "--policy=a=b",
            "--verbose",
            "--max-frame-bytes",
            "10",
            "--shutdown-grace",
            "2.5",
            "--",
            "npx",
            "--policy",
            "--",
        ]
    )
    assert line is not None and line.interpreter is None
    assert line.options == {"policy_path": "a=b", "verbose": True, "max_frame_bytes": 10, "shutdown_grace": 2.5}
    assert (line.command, line.args) == ("npx", ("--policy", "--"))
    line = parse_wrapped(["/usr/bin/python3.12", "/v/bin/assay", "mcp", "wrap", "--", "srv"])
    assert line is not None and line.interpreter == "/usr/bin/python3.12" and line.assay == "/v/bin/assay"


@pytest.mark.parametrize("name", ["--", "-x", "my server", "a=b", "--label=x", "", " ", "GitHub", "--policy"])
@pytest.mark.parametrize("policy", ["/p.yaml", "/a b/p=q.yaml", "-p.yaml", "--"])
@pytest.mark.parametrize("log_dir", [None, "/var/log/a b", "-logs"])
def test_lines_protect_writes_with_odd_names_and_paths_are_recognised(name, policy, log_dir):
    args = p.wrapped_args(name, "npx", ["-y", "--", "-x"], p.WrapOptions("/bin/assay", policy, log_dir))
    line = parse_wrapped(["/bin/assay", *args])
    assert line is not None
    assert (line.options["label"], line.options["policy_path"], line.server) == (
        name,
        policy,
        ["npx", "-y", "--", "-x"],
    )
    entry = json.dumps({"mcpServers": {name: {"command": "/bin/assay", "args": args}}})
    assert [c.action for c in p.protect_text(entry, CLAUDE, OPTS).changes] == ["skipped"]
    assert [s["wrapped"] for s in d.parse_config_file(entry.encode(), CLAUDE)[0]] == [True]


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=10)


@settings(max_examples=200, deadline=None)
@given(
    name=_text,
    policy=_text,
    log_dir=st.one_of(st.none(), _text),
    command=_text.filter(lambda s: s != ""),
    args=st.lists(_text, max_size=5),
    assay=st.sampled_from(["assay", "/o/bin/assay", "C:\\x\\assay.exe", "assay.cmd"]),
    client=st.sampled_from(["", *(c.label for c in clients.CLIENTS)]),
)
def test_the_reader_reads_back_exactly_what_wrapped_args_wrote(name, policy, log_dir, command, args, assay, client):
    wrote = p.wrapped_args(name, command, args, p.WrapOptions(assay, policy, log_dir), client=client)
    line = parse_wrapped([assay, *wrote])
    assert line is not None
    assert (line.assay, line.command, list(line.args)) == (assay, command, args)
    expected_fields = {"policy_path", "label"} | (
        {"event_source", "decision_log", "audit_log"} if log_dir is not None else set()
    )
    assert set(line.options) == expected_fields
    assert (line.options["policy_path"], line.options["label"]) == (policy, name)
    # and every value is the one written: the tokens of each option, read back, are the same
    for field_name, value in line.options.items():
        assert isinstance(value, str)
        flag = BY_FIELD[field_name].flag
        options = wrote[2 : len(wrote) - len(args) - 2]  # between "mcp wrap" and "-- command args"
        assert wrote[len(options) + 2] == "--"
        pairs = [options[i : i + 2] for i in range(len(options) - 1)]
        assert [flag, value] in pairs or f"{flag}={value}" in options


# 120 examples (was 250): each starts a real wrap; the reader and wrap read the one option
# declaration, and the pinned examples below keep the edge spellings
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(command_lines(), plain_lines()))
@example(["--label=--", "--", "x"])
@example(["--label", "", "--", "x"])
@example(["--policy=", "--dry-run", "--", "--"])
def test_a_line_the_reader_accepts_wrap_starts_with_the_same_values(monkeypatch, tokens):
    """Random wrap lines (tests/test_wrap_args.py's generator): what the reader accepts, wrap's
    fast parser reads the same way or hands to the cyclopts command, which starts it (exit 0,
    one run) with the same option values and server."""
    parsed = parse_wrap_options(tokens)
    if parsed is None:
        return
    options, server = parsed
    fast = wrap_args.parse_fast(tokens)
    if fast is not None:
        values, command = fast
        assert command == server
        assert {opt.field: values[opt.param] for opt in WRAP_OPTIONS if opt.field in options} == options
    for use_fast in (True, False):
        code, _out, err, runs = outcome(monkeypatch, tokens, fast=use_fast)
        assert (code, err) == (0, ""), tokens
        (config,) = runs
        assert config.argv == server
        for field_name, value in options.items():
            assert getattr(config, field_name) == value
