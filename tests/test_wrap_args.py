"""`assay mcp wrap`'s fast command-line parser agrees with the cyclopts command.

A plain wrap line is read by assay.cli.wrap_args.parse_fast without importing cyclopts
(start-up time); everything else goes to the cyclopts command. These tests drive
assay.cli.app.main both ways (``fast_wrap=True`` and ``False``) over generated command lines and
compare what a user sees: the WrapConfig handed to the run, the exit status, stdout and stderr.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
import textwrap
from typing import Annotated, get_args

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from assay.cli import app, wrap_args
from assay.wrap import options
from assay.wrap.run import WrapConfig

FLAGS = [opt.flag for opt in wrap_args.WRAP_OPTIONS]
VALUE_FLAGS = [opt.flag for opt in wrap_args.WRAP_OPTIONS if opt.kind is not bool]
BOOL_FLAGS = [opt.flag for opt in wrap_args.WRAP_OPTIONS if opt.kind is bool]
NOT_FLAGS = [
    "--verbos",
    "--polic",
    "-v",
    "-p",
    "--no-dry-run",
    "--Policy",
    "---policy",
    "-",
    "--policy-file",
    "--dry_run",
    "--max-frame-byte",
]
VALUES = [
    "a.yaml",
    "p",
    "",
    " ",
    "None",
    "none",
    "null",
    "-x",
    "--",
    "---",
    "-1",
    "+5",
    "0",
    "1",
    "2",
    "007",
    "1_000",
    "10",
    "65536",
    "99999999999999999999",
    "1e3",
    "1.5",
    "0.5",
    ".5",
    "5.",
    "inf",
    "nan",
    "-0",
    "０",
    "١٢",
    " 5",
    "5 ",
    "x y",
    "ü",
    "true",
    "false",
    "assay://org/app",
    "--policy",
    "=",
    "a=b",
    "\t",
    "1.0000000001",
]


@contextlib.contextmanager
def recorded_runs(monkeypatch):
    runs: list[WrapConfig] = []

    def fake_launch(config: WrapConfig) -> int:
        runs.append(config)
        return 0

    monkeypatch.setattr(wrap_args, "launch", fake_launch)
    yield runs


def outcome(monkeypatch, tokens: list[str], fast: bool):
    out, err = io.StringIO(), io.StringIO()
    with recorded_runs(monkeypatch) as runs, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = app.main(["mcp", "wrap", *tokens], fast_wrap=fast)
    return code, out.getvalue(), err.getvalue(), runs


value = st.one_of(st.sampled_from(VALUES), st.text(max_size=6), st.sampled_from(["a.yaml", "5", "x"]))
pair = st.builds(lambda f, v: [f, v], st.sampled_from(VALUE_FLAGS), value)
joined = st.builds(lambda f, v: [f"{f}={v}"], st.sampled_from(VALUE_FLAGS), value)
flag = st.builds(lambda f: [f], st.sampled_from(BOOL_FLAGS))
junk = st.one_of(
    st.builds(lambda f: [f], st.sampled_from(NOT_FLAGS)),
    st.builds(lambda f, v: [f, v], st.sampled_from(NOT_FLAGS + BOOL_FLAGS), value),
    st.builds(lambda f, v: [f"{f}={v}"], st.sampled_from(NOT_FLAGS + BOOL_FLAGS), value),
    st.builds(lambda f: [f], st.sampled_from(VALUE_FLAGS)),  # a value flag without its value
    st.builds(lambda v: [v], value),  # a stray argument before --
    st.just(["--help"]) | st.just(["-h"]),
)
# Mostly well-formed pieces, so that a line is often valid but for one odd value or piece:
# that is where the two parsers could disagree.
option = st.one_of(pair, pair, pair, joined, flag, flag, junk)
server = st.lists(
    st.one_of(st.sampled_from(["python3", "srv.py", "--policy", "x", "--", "-v", "--dry-run"]), st.text(max_size=4)),
    max_size=4,
)


@st.composite
def command_lines(draw) -> list[str]:
    before = [tok for piece in draw(st.lists(option, max_size=5)) for tok in piece]
    if draw(st.integers(0, 9)) == 0:
        return before  # no `--`
    return [*before, "--", *draw(server)]


@st.composite
def plain_lines(draw) -> list[str]:
    """Well-formed lines: each option at most once with a plain value (`--header` up to three
    times), then `--` and a command, or `--url` and no command."""
    remote = draw(st.booleans())
    flags = draw(st.lists(st.sampled_from([f for f in FLAGS if f != "--url"]), unique=True, max_size=len(FLAGS)))
    if "--header" in flags:
        flags += ["--header"] * draw(st.integers(0, 2))
    if remote:
        flags.insert(draw(st.integers(0, len(flags))), "--url")
    tokens: list[str] = []
    for flag in flags:
        kind = wrap_args.BY_FLAG[flag].kind
        if kind is bool:
            tokens.append(flag)
            continue
        if kind is int:
            text = str(draw(st.integers(1, 10**12)))
        elif kind is float:
            text = draw(st.sampled_from(["0", "1", "2.5", "0.25", "30", "10.125"]))
        elif flag == "--transport":
            text = draw(st.sampled_from(["auto", "sse", "streamable-http"]))
        elif flag == "--login":
            text = draw(st.sampled_from(["auto", "never"]))
        else:
            text = draw(st.text(min_size=1, max_size=8).filter(lambda s: not s.startswith("-")))
        tokens += [flag, text] if draw(st.booleans()) else [f"{flag}={text}"]
    if remote:
        return tokens
    return [*tokens, "--", *draw(st.lists(st.text(max_size=5), min_size=1, max_size=3))]


# 100 examples (was 250): both parsers and the config now come from one declaration of each
# option, so what is left to find is in how values are spelled, which 100 lines cover well
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command_lines())
@example(["--verbos", "--", "x"])
@example(["--policy", "a", "--policy", "b", "--", "true"])
@example(["--policy=", "--", "x"])
@example(["--max-frame-bytes", "007", "--", "x"])
@example(["--shutdown-grace", "inf", "--", "x"])
@example(["--label", "None", "--", "x"])
@example(["--dry-run", "--dry-run", "--", "x"])
@example(["--policy", "--", "x"])
@example(["--dry-run", "python", "server.py"])
@example([])
def test_fast_parser_and_cyclopts_agree(monkeypatch, tokens):
    fast = outcome(monkeypatch, tokens, fast=True)
    slow = outcome(monkeypatch, tokens, fast=False)
    assert fast == slow
    code, out, err, runs = fast
    assert len(runs) <= 1 and (code == 0 or not runs)
    if code == 0 and not runs:  # help, the only successful line that starts no run
        assert {"-h", "--help"} & set(tokens) and out.startswith("Usage: assay mcp wrap")
    if code == 2:
        assert err.startswith("assay: error: ") and err.count("\n") == 1


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plain_lines())
def test_plain_lines_take_the_fast_path_and_mean_the_same(monkeypatch, tokens):
    parsed = wrap_args.parse_fast(tokens)
    assert parsed is not None, tokens
    fast = outcome(monkeypatch, tokens, fast=True)
    assert fast == outcome(monkeypatch, tokens, fast=False)
    values, command = parsed
    assert command == (tokens[tokens.index("--") + 1 :] if "--" in tokens else [])
    if fast[0] == 0:
        (config,) = fast[3]
        assert config.argv == command
        for opt in wrap_args.WRAP_OPTIONS:
            assert getattr(config, opt.field) == values[opt.param]


def test_table_defaults_are_wrap_config_defaults():
    defaults = {f.name: f.default for f in dataclasses.fields(WrapConfig)}
    for opt in wrap_args.WRAP_OPTIONS:
        assert defaults[opt.field] == opt.default, opt.flag


def test_the_cyclopts_command_is_built_from_the_table():
    from assay.cli import wrap as wrap_cli

    signature, annotations = wrap_cli.command_signature(options.WRAP_OPTIONS)
    params = list(signature.parameters.values())
    assert params[0].name == "command" and params[0].kind is params[0].VAR_POSITIONAL
    assert [(p.name, p.default) for p in params[1:]] == [(opt.param, opt.default) for opt in options.WRAP_OPTIONS]
    assert all(p.kind is p.KEYWORD_ONLY for p in params[1:])
    for opt in options.WRAP_OPTIONS:
        hint, parameter = get_args(annotations[opt.param])
        assert hint == opt.hint and parameter.name == (opt.flag,), opt.flag


def test_wrap_config_is_the_declared_options_plus_the_command():
    declared = [f.name for f in dataclasses.fields(options.WrapOptions)]
    assert declared == [opt.field for opt in options.WRAP_OPTIONS]
    assert [f.name for f in dataclasses.fields(WrapConfig)] == [*declared, "argv", "env"]
    assert options.BY_FLAG["--policy"].param == "policy" and options.BY_FLAG["--policy"].field == "policy_path"


# A test-only declaration: wrap's options and two more, each declared once (a field with its
# Option), as a new option would be declared in assay.wrap.options.WrapOptions.
@dataclasses.dataclass(kw_only=True)
class _BiggerConfig(WrapConfig):
    new_thing: Annotated[str | None, options.Option("--new-thing", "Something new, declared once.")] = None
    new_count: Annotated[int, options.Option("--new-count", "How many new things.")] = 3
    new_flag: Annotated[bool, options.Option("--new-flag", "A new flag.", env="ASSAY_NEW_FLAG")] = False


def _declare(monkeypatch, config: type) -> None:
    """Derive everything from ``config``'s declaration, as assay.wrap.options does from its own."""
    from assay.wrap import run

    table = options.table_of(config)
    monkeypatch.setattr(options, "WRAP_OPTIONS", table)
    monkeypatch.setattr(options, "BY_FLAG", {opt.flag: opt for opt in table})
    monkeypatch.setattr(options, "BY_FIELD", {opt.field: opt for opt in table})
    monkeypatch.setattr(run, "WrapConfig", config)


def test_an_option_declared_once_reaches_the_cli_help_fast_parser_and_config(monkeypatch):
    _declare(monkeypatch, _BiggerConfig)
    new = options.BY_FLAG["--new-thing"]
    assert (new.param, new.field, new.kind, new.default) == ("new_thing", "new_thing", str, None)
    assert (options.BY_FLAG["--new-count"].kind, options.BY_FLAG["--new-flag"].env) == (int, "ASSAY_NEW_FLAG")
    # the help
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert app.main(["mcp", "wrap", "--help"], fast_wrap=False) == 0
    shown = " ".join(out.getvalue().replace("│", " ").split())
    for flag, text in (
        ("--new-thing", "Something new, declared once."),
        ("--new-count", "How many new things."),
        ("--new-flag", "A new flag."),
    ):
        assert flag in shown and text in shown
    assert "[default: 3]" in shown
    # the fast parser
    tokens = ["--new-thing", "x", "--new-count", "7", "--new-flag", "--label", "L", "--", "srv", "-a"]
    values, command = wrap_args.parse_fast(tokens)
    assert (values["new_thing"], values["new_count"], values["new_flag"], command) == ("x", 7, True, ["srv", "-a"])
    assert wrap_args.parse_fast(["--new-count", "x", "--", "srv"]) is None  # not a plain number: cyclopts says
    # the config, through either parser (the cyclopts command's parameters included)
    for fast in (True, False):
        code, _, err, runs = outcome(monkeypatch, tokens, fast)
        assert code == 0, err
        (config,) = runs
        assert isinstance(config, _BiggerConfig)
        assert (config.new_thing, config.new_count, config.new_flag, config.label) == ("x", 7, True, "L")
        assert config.argv == ["srv", "-a"]
    code, _, err, runs = outcome(monkeypatch, ["--", "srv"], False)
    assert code == 0 and (runs[0].new_thing, runs[0].new_count, runs[0].new_flag) == (None, 3, False)
    code, _, err, _ = outcome(monkeypatch, ["--new-count", "x", "--", "srv"], False)
    assert code != 0 and "--new-count" in err
    # protect's reader of wrap lines reads it as wrap does
    from assay.clients.wrapped import parse_wrap_options

    parsed = parse_wrap_options(["--new-thing", "x", "--new-flag", "--", "srv"])
    assert parsed is not None and parsed[0] == {"new_thing": "x", "new_flag": True}


@pytest.mark.parametrize(
    "annotation, default",
    [
        ("list[str]", None),
        ("bool", True),
        ("str", None),
        ("int | None", None),
        ("tuple[int, ...]", ()),
        ("float", 1),
    ],
)
def test_a_declaration_wrap_cannot_read_is_refused(annotation, default):
    hint = eval(annotation)
    odd = dataclasses.make_dataclass(
        "Odd",
        [("odd", Annotated[hint, options.Option("--odd", "Odd.")], dataclasses.field(default=default))],
        bases=(options.WrapOptions,),
        kw_only=True,
    )
    with pytest.raises(TypeError, match="odd"):
        options.table_of(odd)


def test_help_comes_from_the_table():
    from assay.cli import wrap as wrap_cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert app.main(["mcp", "wrap", "--help"]) == 0
    shown = " ".join(out.getvalue().replace("│", " ").split())
    for opt in options.WRAP_OPTIONS:
        assert opt.flag in shown
        assert " ".join(opt.help.split()) in shown, opt.flag
    assert wrap_cli.help_text().count("\n    ") == len(options.WRAP_OPTIONS) + 1


def test_table_defaults_are_the_session_defaults():
    from assay.session.admission import DEFAULT_MAX_FRAME_BYTES
    from assay.session.session import SessionOptions

    assert options.DEFAULT_MAX_FRAME_BYTES == DEFAULT_MAX_FRAME_BYTES
    session = SessionOptions()
    for name in (
        "dry_run",
        "verbose",
        "label",
        "event_source",
        "max_frame_bytes",
        "shutdown_grace",
        "hide_denied_tools",
    ):
        assert getattr(session, name) == options.BY_FIELD[name].default, name


def test_session_options_from_the_config():
    from assay.session.effects import Sink

    config = WrapConfig(
        argv=["srv"],
        dry_run=True,
        verbose=True,
        label="L",
        decision_log="d",
        audit_log="a",
        decision_log_new="n",
        coverage_out="c",
        request_receipts_out="r",
        max_frame_bytes=7,
        shutdown_grace=2.5,
        hide_denied_tools=True,
        event_source=" assay://x ",
    )
    got = config.session_options(event_source="assay://x", declared_manifest={"tools": []})
    assert (got.dry_run, got.verbose, got.label, got.event_source) == (True, True, "L", "assay://x")
    assert got.decision_sinks == (Sink.DECISION_LOG, Sink.DECISION_LOG_NEW)
    assert (got.audit, got.keep_events, got.receipts) == (True, True, True)
    assert (got.max_frame_bytes, got.shutdown_grace, got.hide_denied_tools) == (7, 2.5, True)
    assert got.declared_manifest == {"tools": []}
    plain = WrapConfig(argv=["srv"]).session_options(event_source=None, declared_manifest=None)
    assert (plain.decision_sinks, plain.audit, plain.keep_events, plain.receipts) == ((), False, False, False)


def test_outputs_are_the_table_rows():
    every = {opt.field: f"/o/{opt.field}" for opt in options.WRAP_OPTIONS if opt.output}
    config = WrapConfig(argv=["srv"], **every)
    assert config.append_outputs() == {"--decision-log": "/o/decision_log", "--audit-log": "/o/audit_log"}
    assert list(config.create_new_outputs()) == [
        "--decision-log-new",
        "--request-receipts-out",
        "--session-context-out",
        "--session-stop-out",
        "--coverage-out",
        "--state-window-out",
        "--observed-manifest-out",
    ]
    assert WrapConfig(argv=["srv"], coverage_out="").create_new_outputs() == {}


def test_deny_deprecations_names_its_variable():
    assert options.BY_FLAG["--deny-deprecations"].env == "ASSAY_STRICT_DEPRECATIONS"
    assert [opt.flag for opt in options.WRAP_OPTIONS if opt.env] == [
        "--deny-deprecations",
        "--shared-session",
        "--state-dir",
    ]
    assert options.BY_FLAG["--shared-session"].env == "ASSAY_SHARED_SESSION"
    assert options.BY_FLAG["--state-dir"].env == "ASSAY_STATE_DIR"


# The lines assay writes into client configs (protect, config-path) are read back by both
# parsers the same way, and mean what was written.
names = st.one_of(
    st.sampled_from(["fs", "GitHub", "my server", "--", "-x", "", "a=b", "--policy", "ü"]), st.text(max_size=6)
)
paths = st.one_of(
    st.sampled_from(["/p/assay.yaml", "-p.yaml", "/a b/p.yaml", "--", "/x=y"]), st.text(min_size=1, max_size=6)
)
commands = st.lists(
    st.one_of(st.sampled_from(["npx", "-y", "--", "--policy", "srv"]), st.text(max_size=4)), min_size=1, max_size=4
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names, paths, st.one_of(st.none(), paths), commands)
@example("--", "-p.yaml", "--", ["--", "x"])
@example("", "/p.yaml", None, ["srv"])
def test_protect_lines_read_back_the_same_both_ways(monkeypatch, name, policy, log_dir, command):
    from assay.clients import protect

    args = protect.wrapped_args(name, command[0], command[1:], protect.WrapOptions("assay", policy, log_dir))
    assert args[:2] == ["mcp", "wrap"]
    fast = outcome(monkeypatch, args[2:], fast=True)
    assert fast == outcome(monkeypatch, args[2:], fast=False)
    assert protect.unwrap_args("assay", args) == (command[0], command[1:])
    code, _out, _err, runs = fast
    assert code == 0, fast
    (config,) = runs
    assert (config.policy_path, config.label, config.argv) == (policy, name, command)
    if log_dir is not None:
        assert config.event_source and config.decision_log and config.audit_log
        assert config.decision_log.startswith(log_dir) and config.audit_log.startswith(log_dir)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(paths, st.one_of(st.none(), st.sampled_from(["npx -y srv", "'/a b/srv' --x", "srv -- --policy y"])))
def test_config_path_lines_read_back_the_same_both_ways(monkeypatch, policy, server):
    from assay.cli.config_path import generated_server

    name, entry = generated_server("assay", policy, server, "/home/u")
    args = entry["args"]
    fast = outcome(monkeypatch, args[2:], fast=True)
    assert fast == outcome(monkeypatch, args[2:], fast=False)
    (config,) = fast[3]
    assert (config.policy_path, config.label) == (policy, name)


def _apps():
    import cyclopts

    return cyclopts.App(name="assay"), cyclopts.App(name="mcp")


HEAVY = (
    "cyclopts",
    "cryptography",
    "tomlkit",
    "jsonschema_rs",
    "rich",
    "assay.cli.wrap",
    "assay.cli._families",
    "assay.signing",
    "assay.discover",
    "assay.clients",
    "assay.clients.protect",
    "assay.preflight",
    "assay.kill",
    "assay.manifest",
    "assay.server",
    "assay.policy.sequence",
    "sqlite3",
    "assay.store.sqlite",  # a policy that shares nothing never opens the session store
    "httpx2",
    "anyio",
    "mcp",
    "joserfc",
    "assay.shells.upstream_http",
    "assay.auth",  # a remote server's (docs/remote.md):
    # never for a command
    "re2",
    "assay.inspect",  # inspection's (docs/inspect.md): never for a policy without inspect
    "fractions",  # a rate window's exact tie only (assay.policy.rates)
    "assay.policy.inspecting",  # the inspect, resources and prompts sections' rules
    "ssl",  # trio's TLS streams and host names (assay.cli.wrap_args.import_trio)
    "idna",
)


def test_wrap_run_loads_no_module_it_does_not_use(tmp_path):
    """A whole wrap run (a policy without schemas, one tools/call relayed to a tiny server)
    never imports cyclopts, the other command families, signing, manifest or jsonschema_rs,
    and starts no process of its own but the keeper and the server."""
    (tmp_path / "assay.yaml").write_text('version: "2.0"\ntools:\n  allow: ["echo"]\n')
    server = tmp_path / "server.py"
    server.write_text(
        textwrap.dedent("""\
        import sys
        line = sys.stdin.readline()
        sys.stdout.write('{"jsonrpc":"2.0","id":1,"result":{"content":[]}}\\n')
        sys.stdout.flush()
        sys.stdin.read()
    """)
    )
    probe = (
        textwrap.dedent("""\
        import json, subprocess, sys
        started = []  # processes this process starts itself (the server is started by the keeper)
        popen_init = subprocess.Popen.__init__
        def recording_init(self, args, *rest, **kw):
            started.append(list(args) if isinstance(args, (list, tuple)) else [args])
            popen_init(self, args, *rest, **kw)
        subprocess.Popen.__init__ = recording_init
        from assay.cli import main
        code = main(["mcp", "wrap", "--policy", "assay.yaml", "--", sys.executable, SERVER])
        loaded = sorted(m for m in HEAVY if m in sys.modules or any(k.startswith(m + ".") for k in sys.modules))
        import trio._core._thread_cache as cache
        with open("loaded.json", "w") as fh:
            json.dump({"code": code, "loaded": loaded, "trio": "trio" in sys.modules, "started": started,
                       "thread_names": cache.set_os_thread_name is not None}, fh)
    """)
        .replace("SERVER", repr(str(server)))
        .replace("HEAVY", repr(HEAVY))
    )
    frame = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}\n'
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ASSAY_")}
    res = subprocess.run(
        [sys.executable, "-c", probe], input=frame, capture_output=True, timeout=60, cwd=tmp_path, env=env
    )
    assert res.returncode == 0, res.stderr
    assert b'"id":1' in res.stdout, (res.stdout, res.stderr)
    report = json.loads((tmp_path / "loaded.json").read_text())
    # trio's import does not run `ldconfig -p` (wrap_args.import_trio), and still names its threads
    assert report == {"code": 0, "loaded": [], "trio": True, "started": [], "thread_names": True}, res.stderr


def test_import_trio_restores_find_library():
    probe = (
        "import ctypes.util\nreal = ctypes.util.find_library\n"
        "from assay.cli.wrap_args import import_trio\nimport_trio()\n"
        "print(ctypes.util.find_library is real, 'trio' in __import__('sys').modules)"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=60, text=True)
    assert res.stdout.split() == ["True", "True"], res.stderr


def test_import_trio_leaves_ssl_and_idna_for_their_first_use():
    """trio's TLS and host-name code still works: the stand-ins import the real modules on
    first use, and a later `import ssl` is the real module."""
    probe = textwrap.dedent("""\
        import sys
        from assay.cli.wrap_args import import_trio
        import_trio()
        before = [m for m in ("ssl", "idna") if m in sys.modules]
        import trio._ssl, trio._socket
        host = trio._socket._idna.encode("bücher.example", uts46=True)
        import ssl
        ok = trio._ssl._stdlib_ssl.SSLError is ssl.SSLError and type(ssl).__name__ == "module"
        import trio.testing
        left, _right = trio.testing.memory_stream_pair()
        tls = trio.SSLStream(left, ssl.create_default_context(), server_hostname="example.org")
        ok = ok and type(tls._ssl_object).__name__ == "SSLObject"
        print(before, host.decode(), ok)
    """)
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=60, text=True)
    assert res.stdout.split("\n")[0] == "[] xn--bcher-kva.example True", res.stderr


def test_cyclopts_path_still_loads_cyclopts(tmp_path):
    """The probe above can see a heavy module: `--help` goes through cyclopts."""
    probe = (
        "import sys, contextlib, io\nfrom assay.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    main(['mcp', 'wrap', '--help'])\n"
        "print('cyclopts' in sys.modules)\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=60, text=True)
    assert res.stdout.split() == ["True"], res.stderr


def test_wrap_starts_its_server_after_the_checks_and_before_trio(tmp_path):
    """docs/testing.md, "Start-up of `assay mcp wrap`": the server starts once the policy is
    loaded and the run checked, before trio, the relay and the session are imported (they load
    while the server starts); cyclopts never."""
    (tmp_path / "assay.yaml").write_text('version: "2.0"\ntools:\n  allow: ["echo"]\n')
    probe = textwrap.dedent("""\
        import json, sys
        from assay.proc import keeper
        real = keeper.fork_keeper
        seen = []
        def spy(*args, **kwargs):
            seen.append(sorted(m for m in MODULES if m in sys.modules))
            return real(*args, **kwargs)
        keeper.fork_keeper = spy
        from assay.cli import main
        code = main(["mcp", "wrap", "--policy", "assay.yaml", "--", sys.executable, "server.py"])
        with open("seen.json", "w") as fh:
            json.dump({"code": code, "seen": seen}, fh)
    """).replace(
        "MODULES", repr(("trio", "assay.shells.stdio.relay", "assay.session.session", "cyclopts", "assay.policy"))
    )
    (tmp_path / "server.py").write_text(
        'import sys\nsys.stdin.readline()\nprint(\'{"jsonrpc":"2.0","id":1,"result":{}}\', flush=True)\n'
    )
    frame = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}\n'
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ASSAY_")}
    res = subprocess.run(
        [sys.executable, "-c", probe], input=frame, capture_output=True, timeout=60, cwd=tmp_path, env=env
    )
    assert res.returncode == 0, res.stderr
    assert b'"id":1' in res.stdout, (res.stdout, res.stderr)
    # the policy is loaded at the fork (it is checked first), the relay and trio are not
    assert json.loads((tmp_path / "seen.json").read_text()) == {"code": 0, "seen": [["assay.policy"]]}


def test_wrap_pauses_the_garbage_collector_for_its_imports_only(tmp_path):
    """docs/testing.md, "Start-up of `assay mcp wrap`": the cyclic garbage collector is paused
    while wrap imports what it runs (here: off when the keeper is forked), and on again when the
    run starts and after main returns; a caller that had it off finds it off."""
    (tmp_path / "assay.yaml").write_text('version: "2.0"\ntools:\n  allow: ["echo"]\n')
    probe = textwrap.dedent("""\
        import gc, json, sys
        from assay.proc import keeper
        import assay.wrap.run as run
        seen = {}
        real_fork, real_run = keeper.fork_keeper, run.run_prepared
        def fork_spy(*args, **kwargs):
            seen["fork"] = gc.isenabled()
            return real_fork(*args, **kwargs)
        async def run_spy(*args, **kwargs):
            seen["run"] = gc.isenabled()
            return await real_run(*args, **kwargs)
        keeper.fork_keeper, run.run_prepared = fork_spy, run_spy
        from assay.cli import main
        line = ["mcp", "wrap", "--policy", "assay.yaml", "--", sys.executable, "server.py"]
        seen["code"] = main(line)
        seen["after"] = gc.isenabled()
        gc.disable()
        main(["mcp", "wrap", "--policy", "missing.yaml", "--", sys.executable, "server.py"])
        seen["kept_off"] = not gc.isenabled()
        with open("seen.json", "w") as fh:
            json.dump(seen, fh)
    """)
    (tmp_path / "server.py").write_text(
        'import sys\nsys.stdin.readline()\nprint(\'{"jsonrpc":"2.0","id":1,"result":{}}\', flush=True)\n'
    )
    frame = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}\n'
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ASSAY_")}
    res = subprocess.run(
        [sys.executable, "-c", probe], input=frame, capture_output=True, timeout=60, cwd=tmp_path, env=env
    )
    assert res.returncode == 0, res.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {"fork": False, "run": True, "code": 0, "after": True, "kept_off": True}, res.stderr


def test_a_run_refused_after_its_server_started_leaves_nothing_running(tmp_path):
    """A run that fails after the server was started early (here: the relay refuses to start)
    ends with the documented `fatal: ...` line and exit 2, and no process of the run is left
    (the server, anything it started, its keeper) when wrap returns."""
    (tmp_path / "assay.yaml").write_text('version: "2.0"\ntools:\n  allow: ["echo"]\n')
    token = f"assay-early-{os.getpid()}-{id(tmp_path)}"
    probe = textwrap.dedent("""\
        import os, sys
        from assay.wrap import run
        async def refuse(prepared, **kwargs):
            raise run.WrapError("refused after the start")
        run.run_prepared = refuse
        from assay.cli import main
        code = main(["mcp", "wrap", "--policy", "assay.yaml", "--", sys.executable, "-c",
                     "import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)", "TOKEN"])
        left = []
        for pid in os.listdir("/proc"):
            if pid.isdigit() and int(pid) != os.getpid():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as fh:
                        cmdline = fh.read()
                    with open(f"/proc/{pid}/stat") as fh:
                        state = fh.read().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                if b"TOKEN" in cmdline and state != "Z":
                    left.append(pid)
        print(code, left)
    """).replace("TOKEN", token)
    res = subprocess.run([sys.executable, "-c", probe], input=b"", capture_output=True, timeout=60, cwd=tmp_path)
    assert res.stdout.decode().split("\n")[0] == "2 []", res.stderr
    assert res.stderr.decode().splitlines()[-1] == "fatal: refused after the start"
