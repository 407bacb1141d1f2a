"""`assay mcp config-path` (spec/cli.md §6): where a client's config lives, and what to paste.

The path comes from the one client table in :mod:`assay.clients` (DECISIONS D29a), the
generated entry runs the server through `assay mcp wrap` with *this* installation's `assay`
script (D29). Nothing is written to disk.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import sysconfig
from typing import Annotated, Any

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import UsageError

_SCRIPT_NAMES = ("assay", "assay.exe")


def find_assay_script() -> str:
    """The `assay` script of this installation (D29): the one running, else the one installed
    next to this interpreter, else the first on PATH, else the bare name."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0).lower() in _SCRIPT_NAMES and os.path.isfile(argv0):
        return os.path.abspath(argv0)
    for directory in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        for name in _SCRIPT_NAMES:
            candidate = os.path.join(directory or "", name)
            if directory and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    import shutil

    found = shutil.which("assay")
    return os.path.abspath(found) if found else "assay"


def generated_server(
    assay: str, policy: str, server: str | None, home: str
) -> tuple[str, dict[str, Any]]:
    """``(server name, {"command", "args"})`` for the mcpServers map (spec/cli.md §6 F4).

    ``--server`` is split shell-style, so a quoted path with spaces stays one argument.
    """
    words: list[str] = []
    if server is not None and server.strip():
        try:
            words = shlex.split(server)
        except ValueError as exc:
            raise UsageError(f"invalid --server {json.dumps(server)}: {exc}") from None
    if words:
        name, command = "mcp-secure", words
    else:
        name, command = "filesystem-secure", ["npx", "-y", "@modelcontextprotocol/server-filesystem", home]
    return name, {"command": assay, "args": ["mcp", "wrap", "--policy", policy, "--", *command]}


def render_terminal(
    display: str, config_path: str | None, exists: bool, policy: str, snippet: str
) -> str:
    """The boxed human output (spec/cli.md §6 F6), ending with one blank line."""
    lines = [f"┌─ {display} Configuration", "│"]
    if config_path is None:
        lines += ["│  Config file: Could not detect path", "│  Status: ✗ Unknown OS or client not installed"]
    else:
        lines.append(f"│  Config file: {config_path}")
        lines.append("│  Status: ✓ Found" if exists else "│  Status: ✗ Not found (will be created)")
    lines += ["│", "├─ Policy file", "│", f"│  {policy}", "│", "├─ Add this to your mcpServers:", "│"]
    lines += [f"│  {line}" for line in snippet.splitlines()]
    lines += [
        "│",
        "└─ Next steps:",
        "   1. Create your policy file",
        "   2. Add the above JSON to your config file",
        f"   3. Restart {display}",
    ]
    return "\n".join(lines) + "\n\n"


def config_path_command(
    client: str,
    /,
    *,
    policy: Annotated[str | None, Parameter(name="--policy")] = None,
    server: Annotated[str | None, Parameter(name="--server")] = None,
    json_: Annotated[bool, Parameter(name="--json", negative=())] = False,
) -> int:
    """Show a client's MCP config file and a ready-to-paste entry that runs a server through assay mcp wrap.

    Parameters
    ----------
    client
        claude (also claude-desktop, claude_desktop) or cursor.
    policy
        Policy file for the generated entry (default: <config dir>/assay/policy.yaml).
    server
        The server command to wrap, e.g. "npx -y @modelcontextprotocol/server-github".
    json_
        Print a JSON document instead of the terminal layout.
    """
    from assay import clients

    label = clients.resolve_client(client)
    if label is None:
        raise UsageError(f"unknown client {json.dumps(client)}. Supported: claude, cursor")
    platform = clients.current_platform()
    home = clients.current_home()
    config_path = clients.user_config_path(label, platform, home, os.environ)
    exists = config_path is not None and os.path.exists(config_path)
    if policy is None:
        policy_path = os.path.join(clients.config_dir(platform, home, os.environ), "assay", "policy.yaml")
    else:
        # A client starts servers from a working directory of its own: a relative path would
        # point somewhere else there, so the pasted entry gets an absolute one.
        policy_path = os.path.abspath(policy)
    name, entry = generated_server(find_assay_script(), policy_path, server, home)
    display = clients.DISPLAY_NAMES[label]
    if json_:
        doc = {
            "client": display,
            "config_path": config_path,
            "config_exists": exists,
            "generated_server": {"server_name": name, "config": entry},
        }
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    else:
        snippet = json.dumps({name: entry}, indent=2, ensure_ascii=False)
        sys.stdout.write(render_terminal(display, config_path, exists, policy_path, snippet))
    return 0


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    mcp.command(config_path_command, name="config-path")
