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
