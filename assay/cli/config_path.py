"""`assay mcp config-path CLIENT`: where a client's config lives, and a paste-ready entry.

The paths and shapes come from the one client table in :mod:`assay.clients`; the generated
entry runs the server through `assay mcp wrap` with *this* installation's `assay` script, in
exactly the shape `assay mcp protect` writes (so `protect --undo` can unwrap a pasted entry
too). Nothing is written to disk (docs/config-path.md).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import Annotated, Any

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import UsageError
from assay.wrap.optionline import flag_of, option_tokens
from assay.clients import find_assay_script  # noqa: F401  (re-exported: older imports)


def generated_server(
    assay: str, policy: str, server: str | None, home: str, stdio_type: str | None = None
) -> tuple[str, dict[str, Any]]:
    """``(server name, entry)`` for the client's server map.

    ``--server`` is split shell-style, so a quoted path with spaces stays one argument; an
    empty or blank ``--server`` is a usage error (it used to fall back to the default silently).
    """
    if server is not None:
        if not server.strip():
            raise UsageError(
                '--server is empty; give the server command, e.g. --server "npx -y @modelcontextprotocol/server-github"'
            )
        try:
            words = shlex.split(server)
        except ValueError as exc:
            raise UsageError(f"invalid --server {json.dumps(server)}: {exc}") from None
        if not words:
            raise UsageError(f"invalid --server {json.dumps(server)}: no command in it")
        name, command = "mcp-secure", words
    else:
        name, command = "filesystem-secure", ["npx", "-y", "@modelcontextprotocol/server-filesystem", home]
    entry: dict[str, Any] = {}
    if stdio_type is not None:
        entry["type"] = stdio_type
    entry["command"] = assay
    entry["args"] = [
        "mcp",
        "wrap",
        *option_tokens(flag_of("policy_path"), policy),
        flag_of("label"),
        name,
        "--",
        *command,
    ]
    return name, entry


def render_snippet(servers_key: str, syntax: str, name: str, entry: dict[str, Any]) -> str:
    """A complete, valid config file holding only the generated entry (JSON, or TOML for Codex)."""
    if syntax == "toml":
        import tomlkit

        doc = tomlkit.document()
        servers = tomlkit.table(is_super_table=True)
        table = tomlkit.table()
        for key, value in entry.items():
            table[key] = value
        servers[name] = table
        doc[servers_key] = servers
        return tomlkit.dumps(doc).strip("\n") + "\n"
    return json.dumps({servers_key: {name: entry}}, indent=2, ensure_ascii=False) + "\n"


def render_terminal(
    *,
    display: str,
    alias: str,
    config_path: str | None,
    exists: bool,
    project_path: str | None,
    policy: str,
    policy_exists: bool,
    servers_key: str,
    syntax: str,
    name: str,
    snippet: str,
) -> str:
    """Explanations around one block that can be pasted as is."""
    lines = [f"{display}"]
    if config_path is None:
        lines.append("  Config file: could not detect the path (unknown OS)")
    else:
        state = "exists" if exists else "not found; the block below is a complete file"
        lines.append(f"  Config file: {config_path} ({state})")
    if project_path is not None:
        lines.append(f"  Project file: {project_path} (same format, for one project)")
    state = "exists" if policy_exists else "not found; `protect --init-policy` below writes a starter policy there"
    lines.append(f"  Policy file: {policy} ({state})")
    lines.append("")
    if syntax == "toml":
        lines.append("Append this to the config file:")
    else:
        lines.append(
            f"Paste this as the config file, or, if it exists, add the {json.dumps(name)} member to its "
            f"{json.dumps(servers_key)} object:"
        )
    lines.append("")
    body = "\n".join(lines) + "\n" + snippet
    tail = [
        "",
        "Or let assay rewrite every server already in the config file (backup kept, --undo restores):",
        f"  assay mcp protect {alias} --policy {shlex.quote(policy)}" + ("" if policy_exists else " --init-policy"),
        "",
        f"Then restart {display}.",
    ]
    return body + "\n".join(tail) + "\n"


def config_path_command(
    client: str,
    /,
    *,
    policy: Annotated[str | None, Parameter(name="--policy")] = None,
    server: Annotated[str | None, Parameter(name="--server")] = None,
    json_: Annotated[bool, Parameter(name="--json", negative=())] = False,
) -> int:
    """Show a client's MCP config file and a ready-to-paste entry that runs a server through assay mcp wrap.

    Exit codes: 0; 2 usage errors (unknown client, empty or unparsable --server).

    Parameters
    ----------
    client
        claude, claude-code, cursor, vscode, windsurf, gemini, codex or zed (any case).
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
        raise UsageError(f"unknown client {json.dumps(client)}. Supported: {clients.client_names()}")
    info = clients.client_info(label)
    platform = clients.current_platform()
    home = clients.current_home()
    config_path = clients.user_config_path(label, platform, home, os.environ)
    project = [
        r.path for r in clients.client_locations(label, platform, home, os.environ, os.getcwd()) if r.scope == "project"
    ]
    exists = config_path is not None and os.path.exists(config_path)
    if policy is None:
        policy_path = os.path.join(clients.config_dir(platform, home, os.environ), "assay", "policy.yaml")
    else:
        if not policy.strip():
            raise UsageError("--policy is empty; give the policy file the entry should enforce")
        # A client starts servers from a working directory of its own: a relative path would
        # point somewhere else there, so the pasted entry gets an absolute one.
        policy_path = os.path.abspath(policy)
    name, entry = generated_server(find_assay_script(), policy_path, server, home, info.stdio_type)
    if json_:
        doc = {
            "client": info.display,
            "config_path": config_path,
            "config_exists": exists,
            "generated_server": {"server_name": name, "config": entry},
        }
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(
            render_terminal(
                display=info.display,
                alias=info.aliases[0],
                config_path=config_path,
                exists=exists,
                project_path=project[0] if project else None,
                policy=policy_path,
                policy_exists=os.path.exists(policy_path),
                servers_key=info.servers_key,
                syntax=info.syntax,
                name=name,
                snippet=render_snippet(info.servers_key, info.syntax, name, entry),
            )
        )
    return 0


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    mcp.command(config_path_command, name="config-path")
