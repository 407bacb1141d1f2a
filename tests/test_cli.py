"""The `assay` command tree (issue 2 item 2): one package version everywhere, usage errors as one
line with exit 2 (docs/compatibility.md, "Whole toolkit")."""

from __future__ import annotations

import subprocess

from assay import __version__
from tests.conftest import ASSAY


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ASSAY), *args], capture_output=True, timeout=60, text=True)


def test_version():
    res = run("--version")
    assert res.returncode == 0
    assert res.stdout == f"assay {__version__}\n"


def test_mcp_help_lists_every_command():
    res = run("mcp", "--help")
    assert res.returncode == 0
    for name in ("wrap", "preflight", "manifest", "discover", "kill", "config-path", "tool", "tools", "policy"):
        assert f" {name} " in res.stdout, name


def test_parse_errors_are_one_line_exit_2():
    """cyclopts' own parse errors -> one stderr line, exit 2, no traceback (docs/compatibility.md,
    "Whole toolkit")."""
    for args in (("mcp", "no-such-command"), ("--no-such-flag",), ("mcp", "preflight", "--format")):
        res = run(*args)
        assert res.returncode == 2, args
        assert res.stderr.count("\n") == 1, res.stderr
        assert res.stderr.startswith("assay: error: ")
        assert "Traceback" not in res.stderr


def test_a_failure_of_the_work_is_fatal_not_a_usage_error(tmp_path):
    """README.md, "Commands": a bad flag or value is `assay: error: ...`; a failure of the work
    itself (a file that cannot be read or loaded, a write that fails) is one `fatal: ...` line
    with the exit code the command documents."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("tools: [1\n")
    unreadable = tmp_path / "fifo.ndjson"
    import os

    os.mkfifo(unreadable)
    out_dir = tmp_path / "no-such-dir" / "p.yaml"
    empty = tmp_path / "empty.ndjson"
    empty.write_text(
        '{"specversion": "1.0", "type": "assay.tool.decision", "time": "2026-08-22T10:15:02.123456+00:00", '
        '"data": {"tool": "read", "decision": "allow", "server": "fs", "session": null, '
        '"reason_code": "P_POLICY_ALLOW"}}\n'
    )
    for args in (
        ("mcp", "policy", "check", str(bad)),
        ("mcp", "policy", "explain", str(bad), "--tool", "x"),
        ("mcp", "tools", "--policy", str(bad), "--", "true"),
        ("mcp", "log", str(unreadable)),
        ("mcp", "policy", "suggest", str(unreadable)),
    ):
        res = run(*args)
        assert res.returncode == 2, (args, res.stderr)
        assert res.stderr.startswith("fatal: ") and res.stderr.count("\n") == 1, (args, res.stderr)
    res = run("mcp", "policy", "suggest", str(empty), "--out", str(out_dir))  # the write fails
    assert res.returncode == 2 and res.stderr.startswith(f"fatal: cannot create {out_dir}"), res.stderr
