"""Helpers for the discover / kill / config-path tests: a private HOME, real helper processes.

Helper processes are plain Python scripts whose argv looks like an MCP server (the file is
named ``fake-mcp-server.py``) or like ``assay mcp wrap`` (a script named ``assay``). Each
announces itself with one ``ready`` line, so tests wait on that event, never on a sleep. A
helper server exits when its stdin closes; the grandchild it may start sleeps at most 120 s,
so nothing outlives a crashed test for long. Every test reaps what it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import ASSAY

PY = sys.executable
EPOCH = "1787000000"  # SOURCE_DATE_EPOCH for byte-comparable discover runs

FAKE_SERVER = textwrap.dedent(
    """
    import os, signal, subprocess, sys
    if "--ignore-term" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = 0
    if "--child" in sys.argv:
        c = subprocess.Popen(
            [sys.executable, "-c",
             "import sys, time; sys.stdout.write('up\\\\n'); sys.stdout.flush(); time.sleep(120)"],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        c.stdout.readline()
        child = c.pid
    sys.stdout.write(f"ready {os.getpid()} {child}\\n")
    sys.stdout.flush()
    sys.stdin.read()
    """
)

FAKE_WRAP = textwrap.dedent(
    """
    import os, subprocess, sys
    argv = sys.argv[1:]
    child_argv = argv[argv.index("--") + 1:]
    c = subprocess.Popen(child_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = c.stdout.readline().decode().split()
    sys.stdout.write(f"ready {os.getpid()} {line[1]}\\n")
    sys.stdout.flush()
    sys.stdin.read()
    c.stdin.close()
    c.wait()
    """
)


def make_env(home: Path, **extra: str) -> dict[str, str]:
    """A child environment with a private HOME and XDG dirs (and no ASSAY_* variables)."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("ASSAY_", "XDG_"))}
    env.pop("SOURCE_DATE_EPOCH", None)
    # The width of the terminal running the tests (pytest-xdist workers have COLUMNS=80) must
    # not change what a command prints; a test that wants a width sets COLUMNS itself.
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    env["HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    env["XDG_DATA_HOME"] = str(home / ".local" / "share")
    env["XDG_CACHE_HOME"] = str(home / ".cache")
    env.update(extra)
    return env


def run_assay(*args: str, env: dict[str, str], cwd: Path | str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(ASSAY), *args], env=env, cwd=str(cwd), capture_output=True, timeout=timeout)


def write_json(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2))
    return path


def config_only_policy(path: Path, **discovery) -> Path:
    """A policy whose discovery section scans config files only (no machine-dependent output)."""
    block = {"enabled": True, "methods": ["config_files"], **discovery}
    path.write_text('version: "2.0"\ndiscovery: ' + json.dumps(block) + "\n")
    return path


class Helper:
    """A started helper process: ``pid``, ``child`` (0 if none) and the Popen to reap."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        ready = self.proc.stdout.readline().decode().split()
        assert ready and ready[0] == "ready", ready
        self.pid = int(ready[1])
        self.child = int(ready[2])

    def close(self) -> None:
        """Stop and reap the helper, and stop its child if one is left (we started it)."""
        if self.child:
            signal_pid(self.child, signal.SIGKILL)
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        self.proc.stdout.close()


def start_server(tmp: Path, *flags: str) -> Helper:
    script = tmp / "fake-mcp-server.py"
    if not script.exists():
        script.write_text(FAKE_SERVER)
    return Helper([PY, str(script), *flags])


def start_wrap(tmp: Path, server_name: str = "fake-mcp-server.py") -> Helper:
    """A process whose argv is ``python .../assay mcp wrap --policy p -- python <server_name>``."""
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "assay"
    script.write_text(FAKE_WRAP)
    server = tmp / server_name
    if not server.exists():
        server.write_text(FAKE_SERVER)
    return Helper([PY, str(script), "mcp", "wrap", "--policy", "p.yaml", "--", PY, str(server)])


def start_plain(tmp: Path) -> Helper:
    """A process that is not an MCP server by any rule."""
    script = tmp / "plain_sleeper.py"
    script.write_text("import os, sys\nprint(f'ready {os.getpid()} 0', flush=True)\nsys.stdin.read()\n")
    return Helper([PY, str(script)])


def signal_pid(pid: int, sig: int) -> None:
    """Signal a pid we started, through a pidfd so a reused pid is never hit."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        signal.pidfd_send_signal(fd, sig)
    except OSError:
        pass
    finally:
        os.close(fd)


def gone_within(pid: int, timeout: float) -> bool:
    """True when ``pid`` has exited (zombie or reaped) within ``timeout`` seconds (pidfd event)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        p = select.poll()
        p.register(fd, select.POLLIN)
        return bool(p.poll(int(timeout * 1000)))
    finally:
        os.close(fd)


def unused_pid() -> int:
    """A pid no process can have: one above the kernel's pid_max."""
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    except (OSError, ValueError):
        return 4194305
