"""`assay mcp discover` and its hidden deprecated flat form `assay discover` (docs/discover.md).

A thin layer over :mod:`assay.discover`: read the policy, run the scanners, print or write the
document, then report findings. The shim runs the very same function after one stderr warning
line, so stdout, exit codes and artifacts cannot drift apart.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Annotated, Literal

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import fatal

SHIM_WARNING = "warning: `assay discover` is deprecated; use `assay mcp discover` instead"


def _generated_at_ns() -> int:
    """Now, or ``SOURCE_DATE_EPOCH`` when set (reproducible reports, byte-comparable runs)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        return int(epoch) * 1_000_000_000
    return time.time_ns()


def _write_output(path: str, text: str) -> None:
    """Replace ``path`` atomically (temp file in the same directory, then rename). A missing
    parent directory is created, so `-o .assay/inventory.yaml` works in a fresh directory."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".assay-discover-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def discover_command(
    *,
    local: Annotated[bool, Parameter(name="--local", negative=())] = False,
    format: Annotated[Literal["table", "json", "yaml"], Parameter(name="--format")] = "table",
    output: Annotated[str | None, Parameter(name=["--output", "-o"])] = None,
    fail_on: Annotated[list[str] | None, Parameter(name="--fail-on", consume_multiple=False, negative=())] = None,
    policy: Annotated[str | None, Parameter(name="--policy")] = None,
) -> int:
    """List MCP servers in client config files and among running processes.

    Exit codes: 0; 10 unmanaged servers found and failing; 11 servers without authentication found and failing; 2 usage errors.

    Parameters
    ----------
    local
        Accepted for compatibility; discovery is always local.
    format
        table (human report), json or yaml (the inventory document).
    output
        Write the json/yaml document to this file instead of stdout (ignored for table).
    fail_on
        Comma-separated findings that fail the run: unmanaged, no_auth. Repeatable.
    policy
        A policy file whose discovery section selects methods and reactions.
    """
    from assay import clients
    from assay import discover as d

    settings = d.DiscoverySettings()
    if policy is not None:
        from assay.policy import PolicyError, PolicyFileError, load_policy_file

        try:  # the one policy file entry: capped read, ASSAY_MCP_MAX_POLICY_BYTES, YAML budget
            loaded = load_policy_file(policy, warn=lambda line: sys.stderr.write(line + "\n"))
        except (PolicyFileError, PolicyError) as exc:
            return fatal(str(exc))
        settings = d.settings_from_policy(loaded.discovery)

    locations = clients.config_locations(clients.current_platform(), clients.current_home(), os.environ, os.getcwd())
    result = d.run_discovery(settings, locations=locations, self_pid=os.getpid())
    for line in result.warnings:
        sys.stderr.write(line + "\n")
    now = _generated_at_ns()
    doc = d.build_document(result.servers, result.errors, generated_at_ns=now, host=d.host_info())

    if format == "table":
        for line in d.error_warning_lines(result.errors):
            sys.stderr.write(line + "\n")
        sys.stdout.write(d.render_table(doc, now))
    else:
        text = d.render_json(doc) if format == "json" else d.render_yaml(doc)
        if output is not None:
            try:
                _write_output(output, text)
            except OSError as exc:
                return fatal(f"cannot write {output}: {exc.strerror or exc}")
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()

    lines, code = d.evaluate_findings(doc["summary"], d.parse_fail_on(fail_on), settings)
    for line in lines:
        sys.stderr.write(line + "\n")
    return code


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    mcp.command(discover_command, name="discover")
    app.command(discover_command, name="discover", show=False)  # app.main prints SHIM_WARNING
