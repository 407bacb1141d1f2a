"""`assay mcp discover`: MCP servers in client config files and among running processes.

Sans-IO core (docs/discover.md): parse a config file's bytes into server
entries and per-file errors, classify a process table snapshot, summarise, render JSON / YAML /
table, and decide the exit code. The thin I/O layer at the bottom reads the files of
:mod:`assay.clients` and scans ``/proc``. `assay mcp kill` reuses the process scan so that both
commands agree on what an MCP server process is (docs/discover.md).

A malformed or unreadable config file never crashes the scan and is never skipped silently: it
becomes an entry of the ``errors`` list (docs/discover.md).
"""

from __future__ import annotations

import json
import os
import platform as _platform
import posixpath
import shlex
import socket
import stat
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from assay.clients import ConfigLocation

__all__ = [
    "ProcInfo",
    "DiscoverySettings",
    "MAX_CONFIG_BYTES",
    "MCP_PROCESS_MARKERS",
    "runs_assay_wrap",
    "looks_like_mcp_server",
    "strip_jsonc",
    "parse_config_file",
    "classify_processes",
    "mcp_server_pids",
    "descendants",
    "summarize",
    "build_document",
    "format_rfc3339",
    "format_table_time",
    "render_json",
    "render_yaml",
    "render_table",
    "error_warning_lines",
    "evaluate_findings",
    "parse_fail_on",
    "settings_from_policy",
    "host_info",
    "read_config_file",
    "scan_config_files",
    "read_proc_table",
    "run_discovery",
    "DiscoveryResult",
    "parse_proc_stat",
    "read_proc_info",
]

#: A process whose argv (joined by spaces, lower-cased) contains one of these is an MCP server
#: (docs/discover.md).
MCP_PROCESS_MARKERS = ("mcp-server", "@modelcontextprotocol/server", "mcp_server")

#: Config files larger than this are reported, not read (a client config is a few KiB).
MAX_CONFIG_BYTES = 16 * 1024 * 1024

_ASSAY_SCRIPT_NAMES = frozenset({"assay", "assay.exe", "assay.cmd", "assay.bat"})
_METHOD_VARIANTS = {"network": "Network", "dns": "Dns", "well_known": "WellKnown"}
_STATUS_VARIANTS = {
    "configured": "Configured",
    "running": "Running",
    "listening": "Listening",
    "unreachable": "Unreachable",
    "unknown": "Unknown",
}
_AUTH_VARIANTS = {"none": "None", "api_key": "ApiKey", "o_auth": "OAuth", "mtls": "Mtls", "unknown": "Unknown"}


# --------------------------------------------------------------------------------------------
# Classification of command lines


def _basename(token: str) -> str:
    return token.replace("\\", "/").rsplit("/", 1)[-1].lower()


def runs_assay_wrap(argv: Sequence[str], _depth: int = 0) -> bool:
    """Does this command line run `assay mcp wrap` (directly, or inside a shell string)?

    ``argv`` is a config entry's ``[command, *args]`` or a process's argv (for a console script
    that is ``[python, /path/bin/assay, mcp, wrap, ...]``). Scanning stops at ``--``: what
    follows belongs to someone else's child. Tokens holding whitespace (``sh -c "..."``) are
    split shell-style and searched too, so a launcher shim still counts (docs/discover.md).
    """
    tokens = list(argv)
    for i, token in enumerate(tokens):
        if token == "--":
            break
        is_assay = _basename(token) in _ASSAY_SCRIPT_NAMES or (
            i > 0 and tokens[i - 1] == "-m" and token in ("assay", "assay.cli")
        )
        if is_assay and tokens[i + 1 : i + 3] == ["mcp", "wrap"]:
            return True
        if _depth < 2 and any(c.isspace() for c in token):
            try:
                inner = shlex.split(token)
            except ValueError:
                inner = token.split()
            if runs_assay_wrap(inner, _depth + 1):
                return True
    return False


def looks_like_mcp_server(argv: Sequence[str]) -> bool:
    """Upstream's process predicate (docs/discover.md)."""
    joined = " ".join(argv).lower()
    return any(marker in joined for marker in MCP_PROCESS_MARKERS)


def _auth_from_names(names: Iterable[str]) -> str:
    """``api_key`` when a credential-looking name is present (docs/discover.md)."""
    for name in names:
        upper = name.upper()
        if "KEY" in upper or "TOKEN" in upper:
            return "api_key"
    return "none"


# --------------------------------------------------------------------------------------------
# Config files (sans-IO)


def strip_jsonc(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments and trailing commas outside strings (VS Code files).

    Removed characters become spaces (newlines are kept), so JSON error positions still point
    at the right line and column of the original file.
    """
    out: list[str] = []
    i, n = 0, len(text)
    pending_comma: int | None = None  # index in ``out`` of a comma that may be trailing
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            pending_comma = None
            i = j + 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
            continue
        if c in "}]" and pending_comma is not None:
            out[pending_comma] = " "
        if c == ",":
            pending_comma = len(out)
        elif not c.isspace():
            pending_comma = None
        out.append(c)
        i += 1
    return "".join(out)


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _error(location: ConfigLocation, message: str) -> dict[str, Any]:
    return {"path": location.path, "client": location.client, "error": message}


def _server_entry(name: str, raw: Any, location: ConfigLocation) -> dict[str, Any] | str:
    """One config server -> discover entry, or an error message for this server."""
    if not isinstance(raw, dict):
        return f"server {_quote(name)}: entry is not an object"
    env = raw.get("env", {})
    if env is None:
        env = {}
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        return f'server {_quote(name)}: "env" is not an object of strings'
    env_names = list(env)
    source = {"type": "config_file", "path": location.path, "client": location.client}
    command = raw.get("command")
    if command is not None:
        if not isinstance(command, str):
            return f'server {_quote(name)}: "command" is not a string'
        args = raw.get("args", [])
        if args is None:
            args = []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            return f'server {_quote(name)}: "args" is not a list of strings'
        transport: dict[str, Any] = {"type": "stdio", "command": command, "args": list(args)}
        wrapped = runs_assay_wrap([command, *args])
        auth = _auth_from_names(env_names)
    else:
        url = raw.get("url", raw.get("serverUrl", raw.get("httpUrl")))
        if not isinstance(url, str):
            return f'server {_quote(name)}: neither "command" nor "url" is a string'
        kind = str(raw.get("type", raw.get("transport", ""))).lower()
        if kind == "sse":
            ttype = "sse"
        elif kind in ("ws", "websocket", "web_socket") or url.lower().startswith(("ws://", "wss://")):
            ttype = "web_socket"
        else:
            ttype = "http"
        transport = {"type": ttype, "url": url}
        wrapped = False  # wrap relays stdio only
        headers = raw.get("headers")
        header_names = list(headers) if isinstance(headers, dict) else []
        auth = _auth_from_names(env_names)
        if auth == "none" and any(
            h.upper() == "AUTHORIZATION" or "KEY" in h.upper() or "TOKEN" in h.upper() for h in header_names
        ):
            auth = "api_key"
    return {
        "id": f"{location.client}-{name}",
        "name": name,
        "source": source,
        "transport": transport,
        "status": "configured",
        "policy_status": "managed" if wrapped else "unmanaged",
        "auth": auth,
        "env_vars": env_names,
        "risk_hints": [],
        "wrapped": wrapped,
    }


def _load_toml(text: str) -> Any:
    import tomllib

    return tomllib.loads(text)


def parse_config_file(data: bytes, location: ConfigLocation) -> tuple[list[dict], list[dict]]:
    """Parse one config file's bytes into ``(servers, errors)`` (docs/discover.md, 'Config files').

    A file without the server map holds no servers and is not an error (Claude Desktop, Gemini
    CLI and Zed keep other settings in the same file). One bad server entry is reported and the
    file's other servers are still listed. JSON, JSON with comments (VS Code, Zed) and TOML
    (Codex CLI) are read as the client reads them.
    """
    from assay.clients import server_maps

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [], [_error(location, f"not valid UTF-8 (byte {exc.start})")]
    if text.startswith("\ufeff"):
        text = text[1:]
    if location.toml:
        try:
            doc = _load_toml(text)
        except ValueError as exc:
            return [], [_error(location, f"invalid TOML: {exc}")]
    else:
        if location.jsonc:
            text = strip_jsonc(text)
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            return [], [_error(location, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")]
        except RecursionError:
            return [], [_error(location, "invalid JSON: nested too deeply")]
        if not isinstance(doc, dict):
            return [], [_error(location, "top level is not a JSON object")]
    servers: list[dict] = []
    errors: list[dict] = []
    for path, table in server_maps(doc, location):
        if table is None:
            continue
        if not isinstance(table, dict):
            errors.append(_error(location, f"{_quote('.'.join(path))} is not an object"))
            continue
        for name, raw in table.items():
            entry = _server_entry(name, raw, location)
            if isinstance(entry, str):
                errors.append(_error(location, entry))
            else:
                servers.append(entry)
    return servers, errors


# --------------------------------------------------------------------------------------------
# Processes (sans-IO)


@dataclass(frozen=True)
class ProcInfo:
    """One process of a ``/proc`` snapshot. ``start_ticks`` tells a reused pid apart."""

    pid: int
    ppid: int
    argv: tuple[str, ...]
    start_ticks: int | None = None
    started_at: str | None = None
    user: str | None = None


def _children_map(procs: Iterable[ProcInfo]) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
    return children


def descendants(procs: Iterable[ProcInfo], pid: int) -> list[int]:
    """All descendants of ``pid`` in the snapshot (ppid walk), ascending pid."""
    children = _children_map(procs)
    found: set[int] = set()
    stack = list(children.get(pid, ()))
    while stack:
        child = stack.pop()
        if child in found or child == pid:
            continue
        found.add(child)
        stack.extend(children.get(child, ()))
    return sorted(found)


def _wrap_pids_and_their_trees(procs: Sequence[ProcInfo]) -> tuple[set[int], set[int]]:
    wraps = {p.pid for p in procs if p.argv and runs_assay_wrap(p.argv)}
    under: set[int] = set()
    for pid in wraps:
        under.update(descendants(procs, pid))
    return wraps, under


def _process_entry(p: ProcInfo, wrapped: bool) -> dict[str, Any]:
    return {
        "id": f"proc-{p.pid}",
        "name": None,
        "source": {
            "type": "running_process",
            "pid": p.pid,
            "cmdline": " ".join(p.argv),
            "started_at": p.started_at,
            "user": p.user,
        },
        "transport": {"type": "unknown"},
        "status": "running",
        "policy_status": "managed" if wrapped else "unmanaged",
        "auth": "unknown",
        "env_vars": [],
        "risk_hints": [],
        "wrapped": wrapped,
    }


def classify_processes(procs: Iterable[ProcInfo], *, self_pid: int | None = None) -> list[dict]:
    """Running MCP servers of a snapshot, ascending pid (docs/discover.md).

    A running `assay mcp wrap` is listed as wrapped; the server it runs (its child, and that
    child's own descendants, e.g. the node under an npx) is not listed again.
    """
    snapshot = sorted(procs, key=lambda p: p.pid)
    wraps, under = _wrap_pids_and_their_trees(snapshot)
    out: list[dict] = []
    for p in snapshot:
        if p.pid == self_pid or not p.argv or p.pid in under:
            continue
        wrapped = p.pid in wraps
        if wrapped or looks_like_mcp_server(p.argv):
            out.append(_process_entry(p, wrapped))
    return out


def mcp_server_pids(procs: Iterable[ProcInfo], *, self_pid: int | None = None) -> set[int]:
    """Pids kill accepts without `--force` (docs/discover.md): listed servers and the servers wraps run."""
    snapshot = list(procs)
    _, under = _wrap_pids_and_their_trees(snapshot)
    listed = {e["source"]["pid"] for e in classify_processes(snapshot, self_pid=self_pid)}
    return (listed | under) - ({self_pid} if self_pid is not None else set())


# --------------------------------------------------------------------------------------------
# Document, rendering, findings (sans-IO)


def summarize(servers: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The summary counts; a wrapped server counts as managed (docs/discover.md)."""
    return {
        "total": len(servers),
        "configured": sum(1 for s in servers if s["status"] == "configured"),
        "running": sum(1 for s in servers if s["status"] == "running"),
        "managed": sum(1 for s in servers if s["policy_status"] == "managed"),
        "unmanaged": sum(1 for s in servers if s["policy_status"] == "unmanaged"),
        "with_auth": sum(1 for s in servers if s["auth"] not in ("none", "unknown")),
        "without_auth": sum(1 for s in servers if s["auth"] == "none"),
    }


def _fraction(ns: int) -> str:
    """Sub-second digits as needed: none, 3, 6 or 9 (chrono's AutoSi)."""
    frac = ns % 1_000_000_000
    if frac == 0:
        return ""
    if frac % 1_000_000 == 0:
        return f".{frac // 1_000_000:03d}"
    if frac % 1_000 == 0:
        return f".{frac // 1_000:06d}"
    return f".{frac:09d}"


def format_rfc3339(ns: int) -> str:
    """``2026-08-22T05:24:38.123456789Z`` from Unix nanoseconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000)) + _fraction(ns) + "Z"


def format_table_time(ns: int) -> str:
    """``2026-08-22 05:24:38.123456789 UTC`` (docs/discover.md)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ns // 1_000_000_000)) + _fraction(ns) + " UTC"


def build_document(
    servers: Sequence[dict], errors: Sequence[dict], *, generated_at_ns: int, host: Mapping[str, str]
) -> dict[str, Any]:
    """The inventory document, ``errors`` last (docs/discover.md, 'Output')."""
    return {
        "generated_at": format_rfc3339(generated_at_ns),
        "host": dict(host),
        "servers": list(servers),
        "summary": summarize(servers),
        "errors": list(errors),
    }


def render_json(doc: Mapping[str, Any]) -> str:
    """Pretty JSON, 2-space indent, UTF-8 kept (docs/discover.md); no trailing newline."""
    return json.dumps(doc, indent=2, ensure_ascii=False)


def render_yaml(doc: Mapping[str, Any]) -> str:
    """The same data in YAML, members in document order."""
    return yaml.dump(dict(doc), Dumper=yaml.SafeDumper, sort_keys=False, allow_unicode=True, default_flow_style=False)


def _client_of(server: Mapping[str, Any]) -> str:
    source = server["source"]
    if source["type"] == "config_file":
        return source["client"]
    if source["type"] == "running_process":
        return "process"
    return "network"


def render_table(doc: Mapping[str, Any], generated_at_ns: int) -> str:
    """The human report (docs/discover.md) with a WRAPPED column (docs/discover.md).

    A difference from upstream Assay (docs/compatibility.md): status and auth are padded like their headers so
    the added column lines up, and the summary names Managed.
    """
    host = doc["host"]
    lines = [
        "🔍 MCP Server Discovery Report",
        f"   Generated: {format_table_time(generated_at_ns)}",
        f"   Host: {host['hostname']} ({host['os']}/{host['arch']})",
        "",
    ]
    servers = doc["servers"]
    if not servers:
        lines.append("No servers found.")
        return "\n".join(lines) + "\n"
    lines.append(f"{'SERVER ID':<30} {'CLIENT':<15} {'STATUS':<15} {'AUTH':<15} WRAPPED")
    lines.append(f"{'---------':<30} {'------':<15} {'------':<15} {'----':<15} -------")
    for s in servers:
        status = _STATUS_VARIANTS.get(s["status"], s["status"])
        auth = _AUTH_VARIANTS.get(s["auth"], s["auth"])
        wrapped = "yes" if s.get("wrapped") else "no"
        lines.append(f"{s['id'][:29]:<30} {_client_of(s):<15} {status:<15} {auth:<15} {wrapped}")
    summary = doc["summary"]
    lines.append("")
    lines.append(
        f"Summary: Total={summary['total']}, Managed={summary['managed']}, "
        f"Unmanaged={summary['unmanaged']}, NoAuth={summary['without_auth']}"
    )
    return "\n".join(lines) + "\n"


def error_warning_lines(errors: Sequence[Mapping[str, Any]]) -> list[str]:
    """The table format's stderr line per unusable config file (docs/discover.md)."""
    return [f"warning: skipped {e['path']}: {e['error']}" for e in errors]


def parse_fail_on(values: Iterable[str] | None) -> set[str]:
    """Comma-separated, repeatable; unknown words are ignored (docs/discover.md)."""
    out: set[str] = set()
    for value in values or ():
        out.update(part.strip() for part in value.split(",") if part.strip())
    return out


@dataclass(frozen=True)
class DiscoverySettings:
    """What to scan and how to react (docs/discover.md)."""

    enabled: bool = True
    methods: tuple[str, ...] = ("config_files", "processes")
    unmanaged_server: str = "log"
    no_auth: str = "log"


def evaluate_findings(
    summary: Mapping[str, int], fail_on: set[str], settings: DiscoverySettings
) -> tuple[list[str], int]:
    """``(stderr lines, exit code)``: 10 unmanaged, 11 without auth (docs/discover.md)."""
    lines: list[str] = []
    code = 0
    unmanaged = summary["unmanaged"]
    if unmanaged > 0:
        action = "fail" if "unmanaged" in fail_on else settings.unmanaged_server
        if action == "fail":
            lines.append(f"Error: Found {unmanaged} unmanaged servers.")
            code = 10
        elif action == "warn":
            lines.append(f"Warning: Found {unmanaged} unmanaged servers.")
    without = summary["without_auth"]
    if without > 0:
        action = "fail" if "no_auth" in fail_on else settings.no_auth
        if action == "fail":
            lines.append(f"Error: Found {without} servers without authentication.")
            if code == 0:
                code = 11
        elif action == "warn":
            lines.append(f"Warning: Found {without} servers without authentication.")
    return lines, code


def settings_from_policy(discovery: Mapping[str, Any] | None) -> DiscoverySettings:
    """Discovery settings from a loaded policy's ``discovery`` block (docs/discover.md).

    No block -> scan as without a policy. With one, ``enabled`` defaults to false (the policy
    loader fills the defaults, docs/policy.md) and an empty ``methods`` list means both.
    """
    if discovery is None:
        return DiscoverySettings()
    methods = tuple(discovery.get("methods") or ("config_files", "processes"))
    findings = discovery.get("on_findings") or {}
    return DiscoverySettings(
        enabled=bool(discovery.get("enabled", False)),
        methods=methods,
        unmanaged_server=findings.get("unmanaged_server", "log"),
        no_auth=findings.get("no_auth", "log"),
    )


# --------------------------------------------------------------------------------------------
# I/O layer


def host_info() -> dict[str, str]:
    """``hostname``/``os``/``arch`` in Rust's spellings (docs/discover.md)."""
    from assay.clients import current_platform

    try:
        hostname = socket.gethostname() or "unknown"
    except OSError:
        hostname = "unknown"
    machine = _platform.machine().lower()
    arch = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "i686": "x86", "i386": "x86"}.get(
        machine, machine or "unknown"
    )
    return {"hostname": hostname, "os": current_platform(), "arch": arch}


def read_config_file(path: str) -> bytes | None | str:
    """The file's bytes; None when absent; an error message when it cannot be used.

    Opened non-blocking and checked to be a regular file, so a FIFO or device planted at a
    config path cannot hang the scan.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError as exc:
        return f"cannot read file: {exc.strerror or exc}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if st.st_size > MAX_CONFIG_BYTES:
            return f"file too large ({st.st_size} bytes; limit {MAX_CONFIG_BYTES})"
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_CONFIG_BYTES:
                return f"file too large (limit {MAX_CONFIG_BYTES} bytes)"
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        return f"cannot read file: {exc.strerror or exc}"
    finally:
        os.close(fd)


def scan_config_files(locations: Sequence[ConfigLocation]) -> tuple[list[dict], list[dict]]:
    """Read and parse every location in order; one physical file is read once."""
    servers: list[dict] = []
    errors: list[dict] = []
    seen: set[tuple[int, int]] = set()
    for location in locations:
        try:
            st = os.stat(location.path)
            ident = (st.st_dev, st.st_ino)
            if ident in seen:
                continue
            seen.add(ident)
        except OSError:
            pass
        data = read_config_file(location.path)
        if data is None:
            continue
        if isinstance(data, str):
            errors.append(_error(location, data))
            continue
        found, problems = parse_config_file(data, location)
        servers.extend(found)
        errors.extend(problems)
    return servers, errors


_users: dict[int, str | None] = {}


def _user_name(uid: int) -> str | None:
    if uid not in _users:
        try:
            import pwd

            _users[uid] = pwd.getpwuid(uid).pw_name
        except (KeyError, ImportError):
            _users[uid] = None
    return _users[uid]


def _boot_time(proc_root: str) -> int | None:
    try:
        with open(posixpath.join(proc_root, "stat"), "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def parse_proc_stat(data: bytes) -> tuple[int, int] | None:
    """``(ppid, starttime ticks)`` from ``/proc/<pid>/stat``; the name may hold spaces and ')'."""
    try:
        rest = data[data.rindex(b")") + 2 :].split()
        return int(rest[1]), int(rest[19])
    except (ValueError, IndexError):
        return None


def read_proc_info(pid: int, proc_root: str = "/proc", *, btime: int | None = None) -> ProcInfo | None:
    """One process, or None when it is gone or unreadable."""
    base = posixpath.join(proc_root, str(pid))
    try:
        with open(posixpath.join(base, "stat"), "rb") as f:
            parsed = parse_proc_stat(f.read())
        if parsed is None:
            return None
        with open(posixpath.join(base, "cmdline"), "rb") as f:
            raw = f.read()
        uid = os.stat(base).st_uid
    except OSError:
        return None
    ppid, ticks = parsed
    parts = raw.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    argv = tuple(p.decode("utf-8", "replace") for p in parts)
    started_at = None
    if btime is not None:
        started_at = str(btime + ticks // _CLK_TCK)
    return ProcInfo(pid, ppid, argv, ticks, started_at, _user_name(uid))


try:
    _CLK_TCK = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
    _CLK_TCK = 100


def read_proc_table(proc_root: str = "/proc") -> list[ProcInfo]:
    """A snapshot of every readable process (Linux). Empty where there is no /proc."""
    btime = _boot_time(proc_root)
    out: list[ProcInfo] = []
    try:
        names = os.listdir(proc_root)
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        info = read_proc_info(int(name), proc_root, btime=btime)
        if info is not None:
            out.append(info)
    out.sort(key=lambda p: p.pid)
    return out


@dataclass
class DiscoveryResult:
    servers: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def run_discovery(
    settings: DiscoverySettings,
    *,
    locations: Sequence[ConfigLocation],
    proc_root: str = "/proc",
    self_pid: int | None = None,
) -> DiscoveryResult:
    """Run the configured scanners in their listed order (docs/discover.md)."""
    result = DiscoveryResult()
    if not settings.enabled:
        return result
    done: set[str] = set()
    for method in settings.methods:
        if method in done:
            continue
        done.add(method)
        if method == "config_files":
            servers, errors = scan_config_files(locations)
            result.servers.extend(servers)
            result.errors.extend(errors)
        elif method == "processes":
            result.servers.extend(classify_processes(read_proc_table(proc_root), self_pid=self_pid))
        else:
            result.warnings.append(
                f"warning: discovery method {_METHOD_VARIANTS[method]} is configured but not "
                "implemented; nothing was scanned for it"
            )
    return result
