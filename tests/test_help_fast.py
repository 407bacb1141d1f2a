"""`assay --version` and the first help pages without cyclopts (docs/testing.md, "Start-up of --version and --help"): the
committed pages are what cyclopts renders from the live command tree, and every fast line prints
the same bytes, on the same stream, with the same exit status as the cyclopts line."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from assay.cli import _helptext, help_fast
from tests import helptext
from tests.conftest import ASSAY, REPO


def clean_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env


def assay(*tokens: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        [str(ASSAY), *tokens], stdin=subprocess.DEVNULL, capture_output=True, env=env or clean_env(), timeout=120
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def test_committed_pages_are_what_cyclopts_renders_now():
    """Fails when a command's help changed and `python -m tests.helptext --write` was not
    run: the committed module must be exactly what the generator writes today."""
    committed = open(_helptext.__file__, encoding="utf-8").read()
    assert committed == helptext.generate()


@pytest.mark.parametrize(
    "tokens", [list(t) for t in help_fast.LINES] + [["--version"]], ids=lambda t: " ".join(t) or "(none)"
)
def test_fast_line_prints_what_cyclopts_prints(tokens):
    assert assay(*tokens) == helptext.render(tokens)


def test_fast_lines_import_neither_cyclopts_nor_rich():
    code = (
        "import sys; from assay.cli.app import main\n"
        "for line in ([], ['--help'], ['-h'], ['mcp'], ['mcp', '--help'], ['--version']):\n"
        "    assert main(line) == 0\n"
        "assert 'cyclopts' not in sys.modules and 'rich' not in sys.modules, 'imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, capture_output=True, env=clean_env(), timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()


def test_another_width_goes_through_cyclopts():
    """COLUMNS=100: cyclopts renders a wider page than the committed one, and that is printed."""
    env = {**clean_env(), "COLUMNS": "100"}
    code, out, err = assay("--help", env=env)
    assert (code, err) == (0, "")
    assert out != _helptext.PAGES["root"]
    assert "─" * 90 in out


class _Stream(io.StringIO):
    def __init__(self, tty: bool, encoding: str = "utf-8") -> None:
        super().__init__()
        self._tty, self._encoding = tty, encoding

    def isatty(self) -> bool:
        return self._tty

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding


@pytest.mark.parametrize(
    ("environ", "stream", "width"),
    [
        ({}, _Stream(False), 80),
        ({"COLUMNS": "80"}, _Stream(False), 80),
        ({"COLUMNS": "132"}, _Stream(False), 132),
        ({"COLUMNS": "wide"}, _Stream(False), 80),
        ({}, _Stream(True), None),
        ({"COLUMNS": "120"}, _Stream(True), 80),  # a wide terminal: the 80-column page as it is
        ({"COLUMNS": "80"}, _Stream(True), 80),
        ({"COLUMNS": "60"}, _Stream(True), None),  # a narrow one: cyclopts wraps it
        ({"FORCE_COLOR": "1"}, _Stream(False), None),
        ({"TTY_COMPATIBLE": "1"}, _Stream(False), None),
        ({}, _Stream(False, "ascii"), None),
    ],
)
def test_plain_width_follows_rich(environ, stream, width):
    """Under pytest no standard stream is a terminal (stdin is captured), so the width comes
    from COLUMNS or the default."""
    if any(os.isatty(fd) for fd in (0, 1, 2)):
        pytest.skip("a standard stream is a terminal")
    assert help_fast.plain_width(environ, stream) == width


def test_a_wide_terminal_gets_the_page_without_cyclopts():
    """`assay --help` typed in a 100-column terminal (a pseudo-terminal here): the committed page,
    with no cyclopts or rich imported."""
    import pty
    import struct
    import termios
    import fcntl

    probe = (
        "import sys, runpy; sys.argv = ['assay', '--help']\n"
        "from assay.cli.app import main\n"
        "code = main(['--help'])\n"
        "sys.stdout.flush()\n"
        "print('LOADED', 'cyclopts' in sys.modules, 'rich' in sys.modules)\n"
    )
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal of 100 columns on every standard stream
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")}
        os.execve(sys.executable, [sys.executable, "-c", probe], env)
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.waitpid(pid, 0)
    out = b"".join(chunks).decode().replace("\r\n", "\n")
    assert out.startswith(_helptext.PAGES["root"]), out[:400]
    assert out.rstrip().endswith("LOADED False False")
