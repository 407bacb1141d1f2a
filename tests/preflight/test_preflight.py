"""`assay mcp preflight` end to end (issue 2 item 5; docs/preflight.md).

Each phase is reached with a real program named `assay-mcp-server` put first on PATH, both
through the library (`await preflight(...)`) and through the `assay` CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assay import __version__, preflight
from assay.preflight import Phase, PreflightReport, export_line, search_dirs
from tests.conftest import ASSAY, BIN, REPO, SERVER

X = __version__
# the same install lines as README.md 'Install' (they work from a checkout)
INSTALL = f"from an assay-mcp {X} checkout: pipx install . or uv tool install . or pip install ."

NOT_NEEDED = "assay mcp wrap and assay mcp protect do not need assay-mcp-server."
MESSAGES = {
    "missing": (
        "assay-mcp-server was not found on PATH",
        f"Install assay-mcp-server on PATH ({INSTALL}), then re-run assay mcp preflight. {NOT_NEEDED}",
    ),
    "unstartable": (
        "assay-mcp-server on PATH could not be started or did not report a version",
        "Replace the assay-mcp-server on PATH with a working binary from the same Assay release.",
    ),
    "invalid_root": ("policy root must be an existing directory", "Pass --policy-root to an existing directory."),
    "startup_refused": (
        "assay-mcp-server refused to start with this policy root",
        "Unset ASSAY_AUTH_* and confirm the server can start with this --policy-root.",
    ),
    "startup_timeout": (
        "assay-mcp-server did not exit before the preflight deadline",
        "Retry after checking that assay-mcp-server is not blocked at startup.",
    ),
    "ready": ("assay-mcp-server on PATH matches this CLI and accepted the policy root", ""),
}


class FakeServer:
    """A shell script called `assay-mcp-server` alone in a directory that becomes PATH.

    ``version_out`` is written verbatim (from a data file) on `--version`; ``startup`` is the
    shell body run for `--policy-root ROOT`. The script records each pid it ran as.
    """

    def __init__(self, root: Path, version_out: bytes = b"", version_body: str = "", startup: str = "exit 0"):
        self.dir = root / "bin"
        self.dir.mkdir()
        self.path = self.dir / "assay-mcp-server"
        self.pids = root / "pids"
        (root / "version.out").write_bytes(version_out)
        body = version_body or f"/bin/cat {root / 'version.out'}; exit 0"
        self.path.write_text(
            f'#!/bin/sh\necho $$ >> {self.pids}\nif [ "$1" = "--version" ]; then\n  {body}\nfi\n{startup}\n'
        )
        self.path.chmod(0o755)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return dict(base, PATH=str(self.dir))

    def ran_pids(self) -> list[int]:
        if not self.pids.exists():
            return []
        return [int(x) for x in self.pids.read_text().split()]


def good_version() -> bytes:
    return f"assay-mcp-server {X}\n".encode()


def run_cli(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(ASSAY), "mcp", "preflight", *args], env=env, cwd=cwd, capture_output=True, timeout=60)


def check_report(report: PreflightReport, phase: str, actual: str | None, root: str = ".") -> None:
    assert report.phase.value == phase
    if phase == "wrong_version":
        assert report.message == f"assay-mcp-server reported {actual} but this CLI expects {X}"
        assert report.next_step == f"Install assay-mcp-server {X} on PATH ({INSTALL})."
    else:
        assert (report.message, report.next_step) == MESSAGES[phase]
    assert report.actual_version == actual
    assert report.policy_root == root
    assert report.expected_version == X
    assert report.exit_code == (0 if phase == "ready" else 2)


def check_json(stdout: bytes, phase: str, actual: str | None, root: str = ".") -> dict:
    """P24: exact member order, no extra members, actual_version only when parsed."""
    doc = json.loads(stdout)
    keys = ["schema", "phase", "message", "next_step", "expected_version", "policy_root"]
    if actual is not None:
        keys.append("actual_version")
    if phase == "missing":  # docs/preflight.md, "Installed but not on PATH"
        keys += ["installed_at", "path_dir", "needed_by_wrap_and_protect"]
        assert doc["needed_by_wrap_and_protect"] is False
    assert list(doc) == keys
    assert doc["schema"] == "assay.mcp_preflight.v0"
    assert doc["phase"] == phase
    assert doc.get("actual_version") == actual
    assert doc["policy_root"] == root
    assert stdout.endswith(b"}\n")
    return doc


# -- each phase, through the library and the CLI -------------------------------------------------


async def test_missing_when_nothing_on_path(tmp_path, base_env):
    env = dict(base_env, PATH=str(tmp_path), HOME=str(tmp_path / "home"))
    report = await preflight(".", env=env, search=[])
    check_report(report, "missing", None)
    assert report.installed_at is None
    proc_ = run_isolated_cli(tmp_path, env)
    assert proc_.returncode == 2
    assert proc_.stdout.decode() == f"missing: {MESSAGES['missing'][0]}\n{MESSAGES['missing'][1]}\n"
    assert proc_.stderr == b""  # P22
    doc = check_json(run_isolated_cli(tmp_path, env, "--format", "json").stdout, "missing", None)
    assert (doc["installed_at"], doc["path_dir"]) == (None, None)


def run_isolated_cli(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`assay mcp preflight` run by an interpreter in a directory of its own (a symlink to this
    one), so that neither the running `assay`'s directory nor the interpreter's holds an
    assay-mcp-server (docs/preflight.md, "Installed but not on PATH")."""
    bindir = tmp_path / "isolated" / "bin"
    if not bindir.exists():
        bindir.mkdir(parents=True)
        (bindir / "python").symlink_to(os.path.realpath(sys.executable))
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = dict(env, PYTHONPATH=os.pathsep.join([str(REPO), *site]))
    code = "import sys; from assay.cli.app import main; sys.exit(main(['mcp', 'preflight', *sys.argv[1:]]))"
    return subprocess.run(
        [str(bindir / "python"), "-c", code, *args], env=env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
    )


def installed_off_path(home: Path) -> Path:
    """A working `assay-mcp-server` of this release in ``home``/.local/bin (uv tool install,
    pipx): a script that runs this interpreter's server."""
    bindir = home / ".local" / "bin"
    bindir.mkdir(parents=True)
    server = bindir / "assay-mcp-server"
    server.write_text(f'#!/bin/sh\nexec {SERVER} "$@"\n')
    server.chmod(0o755)
    return server


@pytest.mark.parametrize("via", ["HOME", "UV_TOOL_BIN_DIR", "PIPX_BIN_DIR", "XDG_BIN_HOME"])
async def test_installed_but_not_on_path(tmp_path, base_env, via):
    """Found in an installer's directory that is not on PATH: "missing" still (nothing on PATH
    runs it), but the report names the file and how to put its directory on PATH
    (docs/preflight.md, "Installed but not on PATH")."""
    home = tmp_path / "home"
    server = installed_off_path(home)
    bindir = str(server.parent)
    env = {k: v for k, v in base_env.items() if k not in ("UV_TOOL_BIN_DIR", "PIPX_BIN_DIR", "XDG_BIN_HOME")}
    env.update(PATH=str(tmp_path / "empty"), HOME=str(home if via == "HOME" else tmp_path / "other"))
    if via != "HOME":
        env[via] = bindir
    report = await preflight(".", env=env, search=search_dirs(env, None, str(tmp_path / "x" / "python")))
    assert report.phase is Phase.MISSING and report.exit_code == 2
    assert report.installed_at == str(server)
    assert report.message == f"assay-mcp-server is installed at {server}, but {bindir} is not on PATH"
    assert report.next_step == (
        f'Put {bindir} on PATH (export PATH="{bindir}:$PATH", or uv tool update-shell '
        f"after a uv tool install), then re-run assay mcp preflight. {NOT_NEEDED}"
    )
    proc_ = run_isolated_cli(tmp_path, env)
    assert proc_.returncode == 2 and proc_.stderr == b""
    assert proc_.stdout.decode() == f"missing: {report.message}\n{report.next_step}\n"
    doc = check_json(run_isolated_cli(tmp_path, env, "--format", "json").stdout, "missing", None)
    assert (doc["installed_at"], doc["path_dir"]) == (str(server), bindir)
    # the advice works: with that directory on PATH, the same check is ready
    ready = run_isolated_cli(tmp_path, dict(env, PATH=bindir))
    assert ready.returncode == 0, ready.stdout


async def test_running_assays_directory_is_searched(tmp_path, base_env):
    """The `assay` that runs (this venv's) has assay-mcp-server next to it; with PATH empty the
    report names that one."""
    env = dict(base_env, PATH=str(tmp_path), HOME=str(tmp_path / "home"))
    proc_ = run_cli(env, "--format", "json")
    doc = check_json(proc_.stdout, "missing", None)
    assert doc["installed_at"] == str(SERVER) and doc["path_dir"] == str(BIN)


def test_search_dirs_order_and_export_quoting():
    env = {"HOME": "/h", "UV_TOOL_BIN_DIR": "/uv", "PIPX_BIN_DIR": "relative", "XDG_BIN_HOME": "/uv/"}
    assert search_dirs(env, "/opt/a/bin/assay", "/venv/bin/python") == [
        "/opt/a/bin",
        "/venv/bin",
        "/uv",
        "/h/.local/bin",
    ]
    assert search_dirs({}, "python", "/venv/bin/python") == ["/venv/bin"]
    assert export_line('/a b/$x"`\\') == 'export PATH="/a b/\\$x\\"\\`\\\\:$PATH"'


async def test_unstartable_not_executable(tmp_path, base_env):
    fake = FakeServer(tmp_path, good_version())
    fake.path.chmod(0o644)
    report = await preflight(".", env=fake.env(base_env))
    check_report(report, "unstartable", None)
    proc_ = run_cli(fake.env(base_env), "--format", "json")
    assert proc_.returncode == 2
    check_json(proc_.stdout, "unstartable", None)


async def test_unstartable_missing_interpreter_is_not_missing(tmp_path, base_env):
    """A `#!` naming a missing interpreter is unstartable, not missing (docs/preflight.md, "Phases")."""
    fake = FakeServer(tmp_path, good_version())
    fake.path.write_text("#!/nonexistent/sh\nexit 0\n")
    report = await preflight(".", env=fake.env(base_env))
    check_report(report, "unstartable", None)


async def test_unstartable_not_a_program(tmp_path, base_env):
    """ENOEXEC (no `#!`, not a binary) is unstartable (docs/preflight.md, "Phases")."""
    fake = FakeServer(tmp_path, good_version())
    fake.path.write_bytes(b"\x7fELF-but-not-really\x00\x00")
    report = await preflight(".", env=fake.env(base_env))
    check_report(report, "unstartable", None)


async def test_unstartable_identity_exit_nonzero_even_with_valid_line(tmp_path, base_env):
    """Row 3: exit code != 0 wins over a valid version line."""
    fake = FakeServer(tmp_path, version_body=f"echo 'assay-mcp-server {X}'; exit 1")
    report = await preflight(".", env=fake.env(base_env))
    check_report(report, "unstartable", None)


async def test_unstartable_identity_timeout_is_bounded(tmp_path, base_env):
    """Row 2: identity probe that hangs -> unstartable within the 2 s deadline, child reaped."""
    fake = FakeServer(tmp_path, version_body="exec /bin/sleep 1000")
    started = time.monotonic()
    report = await preflight(".", env=fake.env(base_env))
    assert time.monotonic() - started < 3.0
    check_report(report, "unstartable", None)
    assert all(not os.path.exists(f"/proc/{pid}") for pid in fake.ran_pids())


@pytest.mark.parametrize(
    "stdout",
    [
        b"assay-mcp-server 5.2\n",
        b"assay-mcp-server 5.2.0-\n",
        b"assay-mcp-server 1foo\n",
        b"assay-mcp-server not-a-version\n",
        b"assay-mcp-server v1.0.0\n",
        b"assay-mcp-server 01.0.0\n",
        b"assay-mcp-server %s junk\n",
        b"assay-mcp-server %s\nextra\n",
        b"assay-mcp-server %s\n\n",
        b"assay-mcp-server %s\r\r\n",
        b"assay-mcp-server  %s\n",
        b"assay-mcp-server\t%s\n",
        b"assay-mcp-server %s\t\n",
        b"other %s\n",
        b"assay-mcp-server\n",
        b"assay-mcp-server \n",
        b"",
        b"\xffassay-mcp-server %s\n",
        b"assay-mcp-server %s\xff\n",
        b"ASSAY-MCP-SERVER %s\n",
    ],
)
async def test_malformed_version_output_is_unstartable(tmp_path, base_env, stdout):
    """Every malformed identity line is unstartable with no actual_version (docs/preflight.md,
    "Phases")."""
    if b"%s" in stdout:
        stdout = stdout.replace(b"%s", X.encode())
    fake = FakeServer(tmp_path, stdout)
    report = await preflight(".", env=fake.env(base_env))
    check_report(report, "unstartable", None)
    proc_ = run_cli(fake.env(base_env), "--format", "json")
    doc = check_json(proc_.stdout, "unstartable", None)
    assert "junk" not in proc_.stdout.decode() and "extra" not in proc_.stdout.decode()  # P14
    assert doc["message"] == MESSAGES["unstartable"][0]


async def test_crlf_version_line_is_accepted(tmp_path, base_env):
    """P16: one trailing CRLF is removed."""
    fake = FakeServer(tmp_path, f"assay-mcp-server {X}\r\n".encode())
    report = await preflight(".", env=fake.env(base_env))
    check_report(report, "ready", X)


@pytest.mark.parametrize("actual", ["0.0.1", f"{X}+build.7", f"{X}-rc.1", "99.0.0"])
async def test_wrong_version_keeps_token_verbatim(tmp_path, base_env, actual):
    """Row 5 and P19: plain string equality (X+build != X); token reported verbatim."""
    fake = FakeServer(tmp_path, f"assay-mcp-server {actual}".encode())
    report = await preflight(".", env=fake.env(base_env))
    check_report(report, "wrong_version", actual)
    proc_ = run_cli(fake.env(base_env), "--format", "json")
    assert proc_.returncode == 2
    check_json(proc_.stdout, "wrong_version", actual)


async def test_wrong_version_beats_invalid_root(tmp_path, base_env):
    """P20: a bad root with a wrong server reports wrong_version (no root check, no 2nd spawn)."""
    fake = FakeServer(tmp_path, b"assay-mcp-server 0.0.1\n")
    report = await preflight(str(tmp_path / "no-such-dir"), env=fake.env(base_env))
    assert report.phase is Phase.WRONG_VERSION
    assert len(fake.ran_pids()) == 1


@pytest.mark.parametrize("kind", ["file", "missing", "dangling_symlink"])
async def test_invalid_root(tmp_path, base_env, kind):
    """Row 6: not an existing directory (symlinks followed; dangling = missing); no 2nd spawn."""
    fake = FakeServer(tmp_path, good_version())
    root = tmp_path / "root"
    if kind == "file":
        root.write_text("not a dir")
    elif kind == "dangling_symlink":
        root.symlink_to(tmp_path / "gone")
    report = await preflight(str(root), env=fake.env(base_env))
    check_report(report, "invalid_root", X, str(root))
    assert len(fake.ran_pids()) == 1
    proc_ = run_cli(fake.env(base_env), "--policy-root", str(root), "--format", "json")
    check_json(proc_.stdout, "invalid_root", X, str(root))


async def test_symlink_to_directory_is_a_valid_root(tmp_path, base_env):
    fake = FakeServer(tmp_path, good_version())
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    report = await preflight(str(tmp_path / "link"), env=fake.env(base_env))
    check_report(report, "ready", X, str(tmp_path / "link"))


async def test_startup_probe_gets_root_exactly_as_given_and_stdin_at_eof(tmp_path, base_env):
    """P4/P5: argv `--policy-root <root as given>`, stdin is the null device (EOF at once)."""
    record = tmp_path / "argv"
    fake = FakeServer(
        tmp_path,
        good_version(),
        startup=f'printf "%s|" "$@" > {record}; /bin/cat >> {record}; exit 0',
    )
    (tmp_path / "pol").mkdir()
    root = str(tmp_path / "pol") + "/./"
    report = await preflight(root, env=fake.env(base_env))
    check_report(report, "ready", X, root)
    assert record.read_text() == f"--policy-root|{root}|"


async def test_startup_refused(tmp_path, base_env):
    fake = FakeServer(tmp_path, good_version(), startup="echo 'secret-startup-output' >&2; exit 3")
    report = await preflight(".", env=fake.env(base_env))
    check_report(report, "startup_refused", X)
    proc_ = run_cli(fake.env(base_env), "--format", "json")
    check_json(proc_.stdout, "startup_refused", X)
    assert b"secret-startup-output" not in proc_.stdout + proc_.stderr  # P14, P22


async def test_startup_timeout_is_bounded_and_reaped(tmp_path, base_env):
    """Row 8: the whole preflight returns in under 3 s and the sleeping child is reaped."""
    fake = FakeServer(tmp_path, good_version(), startup="exec /bin/sleep 1000")
    started = time.monotonic()
    report = await preflight(".", env=fake.env(base_env))
    assert time.monotonic() - started < 3.0
    check_report(report, "startup_timeout", X)
    pids = fake.ran_pids()
    assert len(pids) == 2
    assert all(not os.path.exists(f"/proc/{pid}") for pid in pids)
    started = time.monotonic()
    proc_ = run_cli(fake.env(base_env))
    assert time.monotonic() - started < 10  # CLI start-up plus the 2 s deadline
    assert proc_.returncode == 2
    assert proc_.stdout.decode().startswith("startup_timeout: ")


async def test_missing_at_startup_keeps_actual_version(tmp_path, base_env):
    """Row 9: the server vanished from PATH between the two probes."""
    fake = FakeServer(tmp_path, version_body=f'echo "assay-mcp-server {X}"; /bin/rm -f "$0"; exit 0')
    report = await preflight(".", env=fake.env(base_env), search=[])
    check_report(report, "missing", X)


async def test_unstartable_at_startup_keeps_actual_version(tmp_path, base_env):
    """Row 10: the server became non-executable between the two probes."""
    fake = FakeServer(tmp_path, version_body=f'echo "assay-mcp-server {X}"; /bin/chmod 644 "$0"; exit 0')
    report = await preflight(".", env=fake.env(base_env))
    check_report(report, "unstartable", X)
    proc_ = run_cli(fake.env(base_env), "--format", "json")
    check_json(proc_.stdout, "unstartable", None)  # the CLI run sees the file unexecutable at once


async def test_flooding_server_is_capped_and_never_copied(tmp_path, base_env):
    """P8/P9/P14: megabytes on stdout and stderr at both probes: no deadlock, nothing in the report."""
    flood = "/bin/dd if=/dev/zero bs=65536 count=64 2>/dev/null | /usr/bin/tr '\\\\0' 'Q'"
    fake = FakeServer(
        tmp_path,
        version_body=f"{{ echo 'assay-mcp-server {X}'; {flood}; }}; {flood} >&2; exit 0",
        startup=f"{flood}; {flood} >&2; exit 0",
    )
    started = time.monotonic()
    report = await preflight(".", env=fake.env(base_env))
    assert time.monotonic() - started < 5.0
    # The version line is followed by megabytes: capped at 8 KiB it is not one line -> unstartable.
    check_report(report, "unstartable", None)
    proc_ = run_cli(fake.env(base_env), "--format", "json")
    assert b"QQQQ" not in proc_.stdout and len(proc_.stdout) < 2048
    check_json(proc_.stdout, "unstartable", None)


async def test_flooding_startup_probe_does_not_deadlock(tmp_path, base_env):
    flood = "/bin/dd if=/dev/zero bs=65536 count=64 2>/dev/null | /usr/bin/tr '\\\\0' 'Q'"
    fake = FakeServer(tmp_path, good_version(), startup=f"{flood} >&2; {flood}; exit 0")
    started = time.monotonic()
    report = await preflight(".", env=fake.env(base_env))
    assert time.monotonic() - started < 5.0
    # Its stdout is closed at 8 KiB, so the pipeline dies of SIGPIPE or finishes: never a timeout.
    assert report.phase in (Phase.READY, Phase.STARTUP_REFUSED)
    assert report.actual_version == X


async def test_ready_with_the_real_server(tmp_path, base_env):
    """Row 7 with the real `assay-mcp-server` of this package."""
    env = dict(base_env, PATH=f"{BIN}:{base_env.get('PATH', '')}")
    (tmp_path / "policies").mkdir()
    report = await preflight(str(tmp_path / "policies"), env=env)
    check_report(report, "ready", X, str(tmp_path / "policies"))
    proc_ = run_cli(env, "--policy-root", str(tmp_path / "policies"))
    assert proc_.returncode == 0
    assert proc_.stdout.decode() == f"ready: {MESSAGES['ready'][0]}\n"  # no second line
    proc_ = run_cli(env, "--policy-root", str(tmp_path / "policies"), "--format", "json")
    doc = check_json(proc_.stdout, "ready", X, str(tmp_path / "policies"))
    assert doc["next_step"] == ""


async def test_real_server_refuses_auth_env(tmp_path, base_env):
    """Row 11 with the real server: ASSAY_AUTH_* makes it exit 1 -> startup_refused."""
    env = dict(base_env, PATH=f"{BIN}:{base_env.get('PATH', '')}", ASSAY_AUTH_TOKEN="x")
    report = await preflight(str(tmp_path), env=env)
    check_report(report, "startup_refused", X, str(tmp_path))


def test_usage_errors_exit_2_with_one_line(base_env):
    """P2/G1: only terminal|json; anything else is a usage error, exit 2, one stderr line."""
    for args in (["--format", "text"], ["--format", "JSON"], ["--bogus"]):
        proc_ = run_cli(base_env, *args)
        assert proc_.returncode == 2
        assert proc_.stdout == b""
        assert proc_.stderr.count(b"\n") == 1 and b"Traceback" not in proc_.stderr


def test_policy_root_with_undecodable_bytes_is_lossy_decoded(tmp_path, base_env):
    """P24: `policy_root` is the argument as given, undecodable bytes replaced by U+FFFD."""
    env = dict(base_env, PATH=str(tmp_path), HOME=str(tmp_path))
    proc_ = subprocess.run(
        [os.fsencode(ASSAY), b"mcp", b"preflight", b"--format", b"json", b"--policy-root", b"ro\xffot"],
        env=env,
        capture_output=True,
        timeout=60,
    )
    doc = check_json(proc_.stdout, "missing", None, "ro\ufffdot")
    assert doc["phase"] == "missing"


def test_terminal_output_is_never_json():
    for phase in Phase:
        from assay.preflight import _report

        text = _report(phase, X, ".", X).to_terminal()
        with pytest.raises(ValueError):
            json.loads(text)


def test_help_lists_the_exit_codes(tmp_path):
    res = run_cli(dict(os.environ), "--help", cwd=tmp_path)
    assert res.returncode == 0
    text = " ".join(res.stdout.decode().split())
    assert "Exit codes: 0 ready" in text and "2 not ready (missing, unstartable, wrong version" in text
