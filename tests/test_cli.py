"""The `assay` command tree (issue 2 item 2; spec/cli.md §1, G1; DECISIONS D1, D2, D2a)."""

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
    for name in ("wrap", "preflight", "manifest", "discover", "kill", "config-path", "tool"):
        assert f" {name} " in res.stdout, name


def test_parse_errors_are_one_line_exit_2():
    """D2: cyclopts' own parse errors -> one stderr line, exit 2, no traceback."""
    for args in (("mcp", "no-such-command"), ("--no-such-flag",), ("mcp", "preflight", "--format")):
        res = run(*args)
        assert res.returncode == 2, args
        assert res.stderr.count("\n") == 1, res.stderr
        assert res.stderr.startswith("assay: error: ")
        assert "Traceback" not in res.stderr
