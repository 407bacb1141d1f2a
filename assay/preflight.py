"""`assay mcp preflight`: is the `assay-mcp-server` on PATH ours, and will it start?

Two layers (docs/preflight.md): :func:`parse_version_line` and :func:`classify` are sans-IO and
decide everything from probe outcomes; :func:`preflight` runs the two probes through
:mod:`assay.proc` and is usable from any trio program. The CLI only prints the report.
"""

from __future__ import annotations

import enum
import functools
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from assay._version import __version__

SERVER_PROGRAM = "assay-mcp-server"
SCHEMA = "assay.mcp_preflight.v0"
PROBE_TIMEOUT_S = 2.0
PROBE_OUTPUT_CAP = 8192

# The official SemVer 2.0.0 regex (semver.org), anchored with \Z so no newline slips through.
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?\Z",
    re.ASCII,
)


class Phase(str, enum.Enum):
    """The seven outcomes, in the order a reader meets them in docs/preflight.md, "Phases"."""

    MISSING = "missing"
    UNSTARTABLE = "unstartable"
    WRONG_VERSION = "wrong_version"
    INVALID_ROOT = "invalid_root"
    STARTUP_REFUSED = "startup_refused"
    STARTUP_TIMEOUT = "startup_timeout"
    READY = "ready"


class ProbeOutcome(enum.Enum):
    """How one probe ended, as far as classification cares."""

    NOT_FOUND = "not_found"
    SPAWN_ERROR = "spawn_error"
    TIMEOUT = "timeout"
    EXITED = "exited"


@dataclass(frozen=True)
class Probe:
    outcome: ProbeOutcome
    exit_code: int | None = None
    stdout: bytes = b""


def install_hint(expected: str) -> str:
    """How to install both scripts, as README.md 'Install' says: from a checkout of this
    version, with pipx, uv or pip (the distribution is not on a package index)."""
    return f"from an assay-mcp {expected} checkout: pipx install . or uv tool install . or pip install ."


NOT_NEEDED = "assay mcp wrap and assay mcp protect do not need assay-mcp-server."


def search_dirs(environ: Mapping[str, str], launcher: str | None, executable: str) -> list[str]:
    """Where an installer puts `assay-mcp-server` (docs/preflight.md, "Installed but not on
    PATH"), in this order: the directory of the running `assay` (``launcher``, sys.argv[0]) and
    of the interpreter, ``$UV_TOOL_BIN_DIR``, ``$PIPX_BIN_DIR``, ``$XDG_BIN_HOME`` and
    ``~/.local/bin`` (uv tool install and pipx by default). Absolute paths only, once each."""
    dirs = []
    if launcher and os.path.basename(launcher) == "assay":
        dirs.append(os.path.dirname(os.path.abspath(launcher)))
    dirs.append(os.path.dirname(executable))
    dirs += [environ.get(name, "") for name in ("UV_TOOL_BIN_DIR", "PIPX_BIN_DIR", "XDG_BIN_HOME")]
    home = environ.get("HOME", "")
    if home:
        dirs.append(os.path.join(home, ".local", "bin"))
    out: list[str] = []
    for d in dirs:
        if d and os.path.isabs(d) and os.path.normpath(d) not in out:
            out.append(os.path.normpath(d))
    return out


def find_off_path(dirs: Sequence[str], path: str) -> str | None:
    """The first ``dirs/assay-mcp-server`` that is an executable file, in a directory that is not
    on ``path`` (a PATH value); ``None`` when there is none."""
    on_path = {os.path.realpath(p or ".") for p in path.split(os.pathsep)}
    for d in dirs:
        candidate = os.path.join(d, SERVER_PROGRAM)
        if os.path.realpath(d) in on_path:
            continue
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def export_line(directory: str) -> str:
    """``export PATH="<directory>:$PATH"``, the directory escaped for double quotes."""
    escaped = "".join("\\" + c if c in '\\"$`' else c for c in directory)
    return f'export PATH="{escaped}:$PATH"'


def _texts(phase: Phase, expected: str, actual: str | None, installed_at: str | None = None) -> tuple[str, str]:
    """The stable message / next_step pair (docs/preflight.md, "JSON document")."""
    hint = install_hint(expected)
    if phase is Phase.MISSING and installed_at is not None:
        where = os.path.dirname(installed_at)
        return (
            f"assay-mcp-server is installed at {installed_at}, but {where} is not on PATH",
            f"Put {where} on PATH ({export_line(where)}, or uv tool update-shell after a uv tool "
            f"install), then re-run assay mcp preflight. {NOT_NEEDED}",
        )
    if phase is Phase.MISSING:
        return (
            "assay-mcp-server was not found on PATH",
            f"Install assay-mcp-server on PATH ({hint}), then re-run assay mcp preflight. {NOT_NEEDED}",
        )
    if phase is Phase.UNSTARTABLE:
        return (
            "assay-mcp-server on PATH could not be started or did not report a version",
            "Replace the assay-mcp-server on PATH with a working binary from the same Assay release.",
        )
    if phase is Phase.WRONG_VERSION:
        return (
            f"assay-mcp-server reported {actual} but this CLI expects {expected}",
            f"Install assay-mcp-server {expected} on PATH ({hint}).",
        )
    if phase is Phase.INVALID_ROOT:
        return ("policy root must be an existing directory", "Pass --policy-root to an existing directory.")
    if phase is Phase.STARTUP_REFUSED:
        return (
            "assay-mcp-server refused to start with this policy root",
            "Unset ASSAY_AUTH_* and confirm the server can start with this --policy-root.",
        )
    if phase is Phase.STARTUP_TIMEOUT:
        return (
            "assay-mcp-server did not exit before the preflight deadline",
            "Retry after checking that assay-mcp-server is not blocked at startup.",
        )
    return ("assay-mcp-server on PATH matches this CLI and accepted the policy root", "")


@dataclass(frozen=True)
class PreflightReport:
    """One preflight result; ``actual_version`` is None when the identity probe parsed no token."""

    phase: Phase
    message: str
    next_step: str
    expected_version: str
    policy_root: str
    actual_version: str | None = None
    installed_at: str | None = None  # phase missing only: an assay-mcp-server off PATH

    @property
    def ready(self) -> bool:
        return self.phase is Phase.READY

    @property
    def exit_code(self) -> int:
        return 0 if self.ready else 2

    def to_dict(self) -> dict[str, str | bool | None]:
        """The `assay.mcp_preflight.v0` object, members in the order of docs/preflight.md, "JSON document"."""
        doc: dict[str, str | bool | None] = {
            "schema": SCHEMA,
            "phase": self.phase.value,
            "message": self.message,
            "next_step": self.next_step,
            "expected_version": self.expected_version,
            "policy_root": self.policy_root,
        }
        if self.actual_version is not None:
            doc["actual_version"] = self.actual_version
        if self.phase is Phase.MISSING:
            doc["installed_at"] = self.installed_at
            doc["path_dir"] = None if self.installed_at is None else os.path.dirname(self.installed_at)
            doc["needed_by_wrap_and_protect"] = False
        return doc

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    def to_terminal(self) -> str:
        head = f"{self.phase.value}: {self.message}\n"
        return head + (f"{self.next_step}\n" if self.next_step else "")


def parse_version_line(stdout: bytes) -> str | None:
    """The version token of an identity probe's stdout, or None (docs/preflight.md, "Phases")."""
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if "\r" in text or "\n" in text:
        return None
    prefix = SERVER_PROGRAM + " "
    if not text.startswith(prefix):
        return None
    token = text[len(prefix) :]
    if " " in token or "\t" in token or not _SEMVER.match(token):
        return None
    return token


def policy_root_text(policy_root: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """The argument as given, lossy-decoded (undecodable bytes become U+FFFD)."""
    raw = os.fsencode(policy_root)
    return raw.decode("utf-8", errors="replace")


def root_is_directory(policy_root: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> bool:
    """Row 6: exists and is a directory, symlinks followed (a dangling link is missing)."""
    try:
        return os.path.isdir(policy_root)
    except (OSError, ValueError):
        return False


def _report(
    phase: Phase, expected: str, root: str, actual: str | None, installed_at: str | None = None
) -> PreflightReport:
    message, next_step = _texts(phase, expected, actual, installed_at)
    return PreflightReport(phase, message, next_step, expected, root, actual, installed_at)


def classify(
    identity: Probe,
    root_ok: bool | None = None,
    startup: Probe | None = None,
    *,
    expected: str = __version__,
    policy_root: str = ".",
    installed_at: str | None = None,
) -> PreflightReport | None:
    """Map probe outcomes to a report, the rows of docs/preflight.md, "Phases" in order.

    ``root_ok`` and ``startup`` are only consulted once the identity matched. Returns None when
    the outcome depends on a step not given yet (the root check, then the startup probe).
    ``installed_at`` is an `assay-mcp-server` found off PATH (:func:`find_off_path`), named by
    a `missing` report.
    """
    if identity.outcome is ProbeOutcome.NOT_FOUND:
        return _report(Phase.MISSING, expected, policy_root, None, installed_at)
    if identity.outcome in (ProbeOutcome.SPAWN_ERROR, ProbeOutcome.TIMEOUT) or identity.exit_code != 0:
        return _report(Phase.UNSTARTABLE, expected, policy_root, None)
    actual = parse_version_line(identity.stdout)
    if actual is None:
        return _report(Phase.UNSTARTABLE, expected, policy_root, None)
    if actual != expected:
        return _report(Phase.WRONG_VERSION, expected, policy_root, actual)
    if root_ok is None:
        return None
    if not root_ok:
        return _report(Phase.INVALID_ROOT, expected, policy_root, actual)
    if startup is None:
        return None
    if startup.outcome is ProbeOutcome.EXITED and startup.exit_code == 0:
        return _report(Phase.READY, expected, policy_root, actual)
    if startup.outcome is ProbeOutcome.TIMEOUT:
        return _report(Phase.STARTUP_TIMEOUT, expected, policy_root, actual)
    if startup.outcome is ProbeOutcome.NOT_FOUND:
        return _report(Phase.MISSING, expected, policy_root, actual, installed_at)
    if startup.outcome is ProbeOutcome.SPAWN_ERROR:
        return _report(Phase.UNSTARTABLE, expected, policy_root, actual)
    return _report(Phase.STARTUP_REFUSED, expected, policy_root, actual)


async def _probe(argv: list[str], env: dict[str, str] | None, timeout: float, cap: int) -> Probe:
    from assay import proc

    try:
        result = await proc.run_bounded(argv, timeout=timeout, stdout_cap=cap, stderr_cap=cap, env=env)
    except proc.ProgramNotFound:
        return Probe(ProbeOutcome.NOT_FOUND)
    except proc.SpawnError:
        return Probe(ProbeOutcome.SPAWN_ERROR)
    if result.timed_out:
        return Probe(ProbeOutcome.TIMEOUT)
    return Probe(ProbeOutcome.EXITED, result.exit_code, result.stdout)


async def preflight(
    policy_root: str | os.PathLike[str] = ".",
    *,
    env: dict[str, str] | None = None,
    timeout: float = PROBE_TIMEOUT_S,
    output_cap: int = PROBE_OUTPUT_CAP,
    expected_version: str = __version__,
    search: Sequence[str] | None = None,
) -> PreflightReport:
    """Probe `assay-mcp-server` on PATH (of ``env``, default this process's) and classify.

    Never raises for anything the probed program does; each probe is bounded by ``timeout``
    seconds and ``output_cap`` bytes per stream, and its child is reaped before return. When
    it is not on PATH, the directories ``search`` (default :func:`search_dirs` of ``env``) are
    looked into, so the report can tell "installed, but not on PATH" from "not installed".
    """
    import sys

    environ = os.environ if env is None else env

    def off_path() -> str | None:
        dirs = search_dirs(environ, sys.argv[0] if sys.argv else None, sys.executable) if search is None else search
        return find_off_path(dirs, environ.get("PATH", os.defpath))

    root_arg = os.fspath(policy_root)
    root_text = policy_root_text(root_arg)
    identity = await _probe([SERVER_PROGRAM, "--version"], env, timeout, output_cap)
    settle = functools.partial(classify, expected=expected_version, policy_root=root_text)
    if identity.outcome is ProbeOutcome.NOT_FOUND:
        settle = functools.partial(settle, installed_at=off_path())
    report = settle(identity)
    if report is None:
        root_ok = root_is_directory(root_arg)  # row 6: in-process, before the second spawn
        report = settle(identity, root_ok)
        if report is None:
            startup = await _probe([SERVER_PROGRAM, "--policy-root", root_arg], env, timeout, output_cap)
            if startup.outcome is ProbeOutcome.NOT_FOUND:
                settle = functools.partial(settle, installed_at=off_path())
            report = settle(identity, root_ok, startup)
    assert report is not None
    return report
