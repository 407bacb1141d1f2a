"""Where MCP clients keep their server configs: the one table (DECISIONS D29a).

`assay mcp discover` scans every row; `assay mcp config-path` shows the user-scope row of one
client. Keeping a single table means the two commands can never disagree about a path.

Sans-IO: the functions take the platform, home, environment and working directory as values, so
the macOS and Windows rows are testable on Linux (only Linux behaviour is built and tested).
"""

from __future__ import annotations

import ntpath
import os
import posixpath
import sys
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "ConfigLocation",
    "CLIENT_ALIASES",
    "DISPLAY_NAMES",
    "current_platform",
    "config_dir",
    "config_locations",
    "user_config_path",
    "resolve_client",
    "current_home",
]

#: `config-path` client spellings (case-insensitive) -> client label (spec/cli.md §6 F1).
CLIENT_ALIASES: dict[str, str] = {
    "claude": "claude_desktop",
    "claude-desktop": "claude_desktop",
    "claude_desktop": "claude_desktop",
    "cursor": "cursor",
}

DISPLAY_NAMES: dict[str, str] = {
    "claude_desktop": "Claude Desktop",
    "cursor": "Cursor",
    "vscode": "VS Code",
    "generic": "generic",
}


@dataclass(frozen=True)
class ConfigLocation:
    """One config file a client may read.

    ``client`` is the label discover reports (``claude_desktop``, ``cursor``, ``vscode``,
    ``generic``); ``servers_key`` is the member holding the server map (VS Code uses
    ``servers``); ``scope`` is ``user``, ``project`` (relative to the working directory) or
    ``compat`` (a path upstream scans, kept so old setups are still found); ``jsonc`` says the
    client accepts comments and trailing commas in the file (VS Code does).
    """

    client: str
    path: str
    servers_key: str = "mcpServers"
    scope: str = "user"
    jsonc: bool = False


def current_platform() -> str:
    """``linux``, ``macos`` or ``windows`` (Rust's ``std::env::consts::OS`` spelling)."""
    if sys.platform.startswith("darwin"):
        return "macos"
    if sys.platform.startswith(("win32", "cygwin")):
        return "windows"
    if sys.platform.startswith("linux"):
        return "linux"
    return sys.platform


def _join(platform: str):
    return ntpath.join if platform == "windows" else posixpath.join


def config_dir(platform: str, home: str, env: Mapping[str, str]) -> str:
    """The per-user application config directory: XDG on Linux, ``APPDATA`` on Windows."""
    join = _join(platform)
    if platform == "macos":
        return join(home, "Library", "Application Support")
    if platform == "windows":
        appdata = env.get("APPDATA", "")
        return appdata if appdata else join(home, "AppData", "Roaming")
    xdg = env.get("XDG_CONFIG_HOME", "")
    # The XDG spec says a relative value is invalid and must be ignored.
    return xdg if xdg and posixpath.isabs(xdg) else join(home, ".config")


def config_locations(
    platform: str, home: str, env: Mapping[str, str], cwd: str
) -> list[ConfigLocation]:
    """Every config file discover scans, in scan order (DECISIONS D31: config-file order).

    Native locations of the running OS first, then the project files of ``cwd``, then
    upstream's paths (spec/cli.md §4 D3). A path listed twice is kept once, first row wins.
    """
    join = _join(platform)
    cfg = config_dir(platform, home, env)
    claude_file = "claude_desktop_config.json"
    rows = [
        ConfigLocation("claude_desktop", join(cfg, "Claude", claude_file)),
        ConfigLocation("cursor", join(home, ".cursor", "mcp.json")),
        ConfigLocation("vscode", join(cfg, "Code", "User", "mcp.json"), "servers", jsonc=True),
        ConfigLocation("cursor", join(cwd, ".cursor", "mcp.json"), scope="project"),
        ConfigLocation("vscode", join(cwd, ".vscode", "mcp.json"), "servers", "project", jsonc=True),
        # upstream's list, scanned on every OS (spec/cli.md §4 D3)
        ConfigLocation("claude_desktop", join(home, ".config", "claude", claude_file), scope="compat"),
        ConfigLocation(
            "claude_desktop",
            join(home, "Library", "Application Support", "Claude", claude_file),
            scope="compat",
        ),
        ConfigLocation("generic", join(home, ".vscode", "mcp-settings.json"), scope="compat"),
    ]
    if platform == "windows":
        appdata = env.get("APPDATA", "") or join(home, "AppData", "Roaming")
        rows.append(ConfigLocation("claude_desktop", join(appdata, "Claude", claude_file), scope="compat"))
    seen: set[str] = set()
    out: list[ConfigLocation] = []
    for row in rows:
        key = row.path.lower() if platform == "windows" else row.path
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def user_config_path(client: str, platform: str, home: str, env: Mapping[str, str]) -> str | None:
    """The user-scope config file of ``client`` (what `config-path` shows), or None if unknown."""
    if platform not in ("linux", "macos", "windows"):
        return None
    for row in config_locations(platform, home, env, cwd=home):
        if row.client == client and row.scope == "user":
            return row.path
    return None


def resolve_client(name: str) -> str | None:
    """Map a `config-path` client argument to its label; None when unsupported."""
    return CLIENT_ALIASES.get(name.lower())


def current_home() -> str:
    """The user's home directory (``HOME`` first, as every client does)."""
    return os.path.expanduser("~")
