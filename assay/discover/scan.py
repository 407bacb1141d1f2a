"""The scan (the I/O side of discover, docs/discover.md): read the config files of
:mod:`assay.clients`, scan ``/proc``, in the order the settings list them; the host's identity."""

from __future__ import annotations

import os
import platform as _platform
import socket
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.clients import ConfigLocation
from assay.clients.configs import _error, parse_config_file
from assay.discover.findings import DiscoverySettings
from assay.discover.processes import classify_processes
from assay.discover.procfs import read_proc_table

__all__ = ["MAX_CONFIG_BYTES", "host_info", "read_config_file", "scan_config_files", "DiscoveryResult", "run_discovery"]

#: Config files larger than this are reported, not read (a client config is a few KiB).
MAX_CONFIG_BYTES = 16 * 1024 * 1024

_METHOD_VARIANTS = {"network": "Network", "dns": "Dns", "well_known": "WellKnown"}


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


def scan_config_files(locations: Sequence[ConfigLocation]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Read and parse every location in order; one physical file is read once."""
    servers: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
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


@dataclass
class DiscoveryResult:
    servers: list[dict[str, Any]] = field(default_factory=list[Any])
    errors: list[dict[str, Any]] = field(default_factory=list[Any])
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
