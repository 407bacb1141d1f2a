"""`assay mcp discover`: MCP servers in client config files and among running processes.

One job a module (docs/discover.md):

- :mod:`~assay.discover.commandline` (sans-IO): what a command line runs (`assay mcp wrap`,
  read by :mod:`assay.clients.wrapped` as protect reads it; a launcher of one; an MCP server);
- :mod:`~assay.clients.configs` (sans-IO): a config file's bytes -> server entries and
  per-file errors;
- :mod:`~assay.discover.processes` (sans-IO): a process table snapshot -> running servers, and
  the pids `assay mcp kill` accepts;
- :mod:`~assay.discover.report` (sans-IO): the inventory document, JSON / YAML / table;
- :mod:`~assay.discover.findings` (sans-IO): ``--fail-on``, the policy's ``discovery`` block,
  the exit code;
- :mod:`~assay.discover.procfs` and :mod:`~assay.discover.scan`: the thin I/O layer that reads
  the files of :mod:`assay.clients` and scans ``/proc``.

A malformed or unreadable config file never crashes the scan and is never skipped silently: it
becomes an entry of the ``errors`` list (docs/discover.md).
"""

from __future__ import annotations

from assay.discover.commandline import MCP_PROCESS_MARKERS, launched_wrap_lines, looks_like_mcp_server, parse_wrapped
from assay.clients.configs import parse_config_file, strip_jsonc
from assay.discover.findings import DiscoverySettings, evaluate_findings, parse_fail_on, settings_from_policy
from assay.discover.processes import ProcInfo, classify_processes, descendants, mcp_server_pids
from assay.discover.procfs import parse_proc_stat, read_proc_info, read_proc_table
from assay.discover.report import (
    build_document,
    error_warning_lines,
    format_rfc3339,
    format_table_time,
    render_json,
    render_table,
    render_yaml,
    summarize,
)
from assay.discover.scan import (
    MAX_CONFIG_BYTES,
    DiscoveryResult,
    host_info,
    read_config_file,
    run_discovery,
    scan_config_files,
)

__all__ = [
    "ProcInfo",
    "DiscoverySettings",
    "MAX_CONFIG_BYTES",
    "MCP_PROCESS_MARKERS",
    "parse_wrapped",
    "launched_wrap_lines",
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
