"""Where MCP clients keep their server configs, and in what shape: the one client table.

`assay mcp discover` scans every row; `assay mcp config-path` shows one client's rows;
`assay mcp protect` edits them. Keeping a single table means the three commands can never
disagree about a path or a shape (docs/compatibility.md, 'Client configs', names the client
documentation each row comes from).

Sans-IO: the functions take the platform, home, environment and working directory as values, so
the macOS and Windows rows are testable on Linux (only Linux behaviour is built and tested).
"""

from __future__ import annotations

import ntpath
import os
import posixpath
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Client",
    "CLIENTS",
    "ConfigLocation",
    "CLIENT_ALIASES",
    "current_platform",
    "config_dir",
    "config_locations",
    "client_locations",
    "pick_location",
    "user_config_path",
    "resolve_client",
    "client_info",
    "current_home",
    "find_assay_script",
    "server_maps",
    "client_names",
]


@dataclass(frozen=True)
class Client:
    """One MCP client: what it is called, and the shape of its server config.

    ``servers_key`` is the member holding the server map; ``syntax`` is ``json``, ``jsonc``
    (comments and trailing commas allowed; Gemini CLI strips comments when it loads its
    settings) or ``toml``; ``stdio_type`` is the ``type`` value a
    stdio entry carries where the client documents one; ``source`` names the client's own
    documentation page the locations and shape come from (docs/compatibility.md lists them).
    """

    label: str
    display: str
    aliases: tuple[str, ...]
    servers_key: str
    syntax: str
    source: str
    stdio_type: str | None = None


#: Every client assay knows, in the order `discover` scans them and `--help` lists them.
CLIENTS: tuple[Client, ...] = (
    Client(
        "claude_desktop",
        "Claude Desktop",
        ("claude", "claude-desktop", "claude_desktop"),
        "mcpServers",
        "json",
        "Model Context Protocol docs, 'Connect to local MCP servers'",
    ),
    Client(
        "claude_code",
        "Claude Code",
        ("claude-code", "claude_code"),
        "mcpServers",
        "json",
        "Claude Code docs, 'Connect Claude Code to tools via MCP' (scopes)",
    ),
    Client("cursor", "Cursor", ("cursor",), "mcpServers", "json", "Cursor docs, 'Model Context Protocol (MCP)'"),
    Client(
        "vscode",
        "VS Code",
        ("vscode", "vs-code", "code"),
        "servers",
        "jsonc",
        "VS Code docs, 'MCP configuration reference'",
        stdio_type="stdio",
    ),
    Client(
        "windsurf",
        "Windsurf",
        ("windsurf",),
        "mcpServers",
        "json",
        "Windsurf docs (Cascade), 'Model Context Protocol (MCP)'",
    ),
    Client(
        "gemini_cli",
        "Gemini CLI",
        ("gemini", "gemini-cli", "gemini_cli"),
        "mcpServers",
        "jsonc",
        "Gemini CLI docs, 'MCP servers with Gemini CLI' and 'Gemini CLI configuration'",
    ),
    Client(
        "codex",
        "Codex CLI",
        ("codex", "codex-cli", "codex_cli"),
        "mcp_servers",
        "toml",
        "Codex docs, 'Model Context Protocol' and the config reference",
    ),
    Client(
        "zed", "Zed", ("zed",), "context_servers", "jsonc", "Zed docs, 'Model Context Protocol' and 'Configuring Zed'"
    ),
)

_BY_LABEL = {c.label: c for c in CLIENTS}

#: Client spellings (case-insensitive) -> client label.
CLIENT_ALIASES: dict[str, str] = {alias: c.label for c in CLIENTS for alias in c.aliases}


@dataclass(frozen=True)
class ConfigLocation:
    """One config file a client may read.

    ``client`` is the label discover reports (a :data:`CLIENTS` label, or ``generic``);
    ``servers_key`` is the member holding the server map; ``scope`` is ``user``, ``project``
    (relative to the working directory) or ``compat`` (a path upstream Assay scans, kept so old
    setups are still found); ``jsonc`` says the client accepts comments and trailing commas,
    ``toml`` that the file is TOML. ``nested`` names further server maps inside the file:
    ``("projects", "*", "mcpServers")`` is Claude Code's per-project ("local" scope) map in
    ``~/.claude.json``.
    """

    client: str
    path: str
    servers_key: str = "mcpServers"
    scope: str = "user"
    jsonc: bool = False
    toml: bool = False
    nested: tuple[tuple[str, ...], ...] = ()

    @property
    def syntax(self) -> str:
        return "toml" if self.toml else "jsonc" if self.jsonc else "json"


def current_platform() -> str:
    """``linux``, ``macos`` or ``windows`` (Rust's ``std::env::consts::OS`` spelling)."""
    if sys.platform.startswith("darwin"):
        return "macos"
    if sys.platform.startswith(("win32", "cygwin")):
        return "windows"
    if sys.platform.startswith("linux"):
        return "linux"
    return sys.platform


def _join(platform: str) -> Callable[..., str]:
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


def _row(client: str, path: str, scope: str) -> ConfigLocation:
    info = _BY_LABEL[client]
    nested = (("projects", "*", "mcpServers"),) if client == "claude_code" and scope == "user" else ()
    return ConfigLocation(
        client,
        path,
        info.servers_key,
        scope,
        jsonc=info.syntax == "jsonc",
        toml=info.syntax == "toml",
        nested=nested,
    )


def _codex_home(platform: str, home: str, env: Mapping[str, str]) -> str:
    value = env.get("CODEX_HOME", "")
    isabs = ntpath.isabs if platform == "windows" else posixpath.isabs
    return value if value and isabs(value) else _join(platform)(home, ".codex")


def _zed_dir(platform: str, home: str, env: Mapping[str, str]) -> str:
    join = _join(platform)
    if platform == "windows":
        return join(config_dir(platform, home, env), "Zed")
    if platform == "linux":
        return join(config_dir(platform, home, env), "zed")
    return join(home, ".config", "zed")


def _native_rows(platform: str, home: str, env: Mapping[str, str], cwd: str) -> list[ConfigLocation]:
    join = _join(platform)
    cfg = config_dir(platform, home, env)
    user = [
        _row("claude_desktop", join(cfg, "Claude", "claude_desktop_config.json"), "user"),
        _row("claude_code", join(home, ".claude.json"), "user"),
        _row("cursor", join(home, ".cursor", "mcp.json"), "user"),
        _row("vscode", join(cfg, "Code", "User", "mcp.json"), "user"),
        _row("windsurf", join(home, ".codeium", "windsurf", "mcp_config.json"), "user"),
        _row("gemini_cli", join(home, ".gemini", "settings.json"), "user"),
        _row("codex", join(_codex_home(platform, home, env), "config.toml"), "user"),
        _row("zed", join(_zed_dir(platform, home, env), "settings.json"), "user"),
    ]
    project = [
        _row("claude_code", join(cwd, ".mcp.json"), "project"),
        _row("cursor", join(cwd, ".cursor", "mcp.json"), "project"),
        _row("vscode", join(cwd, ".vscode", "mcp.json"), "project"),
        _row("gemini_cli", join(cwd, ".gemini", "settings.json"), "project"),
        _row("codex", join(cwd, ".codex", "config.toml"), "project"),
        _row("zed", join(cwd, ".zed", "settings.json"), "project"),
    ]
    return user + project


def config_locations(platform: str, home: str, env: Mapping[str, str], cwd: str) -> list[ConfigLocation]:
    """Every config file discover scans, in scan order (deterministic: this order, always).

    The user files of every client of :data:`CLIENTS` first, then the project files of ``cwd``,
    then the paths upstream Assay scans. A path listed twice is kept once, first row wins.
    """
    join = _join(platform)
    claude_file = "claude_desktop_config.json"
    rows = _native_rows(platform, home, env, cwd) + [
        # upstream Assay's list, scanned on every OS
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


def client_locations(client: str, platform: str, home: str, env: Mapping[str, str], cwd: str) -> list[ConfigLocation]:
    """The user and project files of one client (`config-path` and `protect` use these)."""
    if platform not in ("linux", "macos", "windows"):
        return []
    return [row for row in _native_rows(platform, home, env, cwd) if row.client == client]


def pick_location(
    client: str, scope: str, config: str | None, platform: str, home: str, env: Mapping[str, str], cwd: str
) -> ConfigLocation:
    """The file `protect` edits: ``config`` (an absolute path, read in the client's format) or
    the client's row of ``scope``. ValueError with a one-line reason when there is none."""
    info = _BY_LABEL[client]
    rows = client_locations(client, platform, home, env, cwd)
    if config is not None:
        same = [r for r in rows if r.path == config]
        if same:
            return same[0]
        basename = (ntpath if platform == "windows" else posixpath).basename(config)
        nested = (("projects", "*", "mcpServers"),) if client == "claude_code" and basename == ".claude.json" else ()
        return ConfigLocation(
            client,
            config,
            info.servers_key,
            "user",
            jsonc=info.syntax == "jsonc",
            toml=info.syntax == "toml",
            nested=nested,
        )
    for row in rows:
        if row.scope == scope:
            return row
    scopes = sorted({r.scope for r in rows})
    if not scopes:
        raise ValueError(f"no known config location for {info.display} on this system; pass --config FILE")
    raise ValueError(
        f"{info.display} has no {scope} config; use --scope {' or --scope '.join(scopes)}, or --config FILE"
    )


def user_config_path(client: str, platform: str, home: str, env: Mapping[str, str]) -> str | None:
    """The user-scope config file of ``client`` (what `config-path` shows), or None if unknown."""
    for row in client_locations(client, platform, home, env, cwd=home):
        if row.scope == "user":
            return row.path
    return None


def server_maps(doc: Any, location: ConfigLocation) -> list[tuple[tuple[str, ...], Any]]:
    """``(key path, server map)`` of every server map of a parsed config, in file order.

    The main map (``servers_key`` at the root) first, then the ``nested`` ones; ``*`` in a
    nested path matches every member. A missing map is left out; a present map that is not an
    object is returned as is, for the caller to report.
    """
    out: list[tuple[tuple[str, ...], Any]] = []
    if not isinstance(doc, dict):
        return out
    if location.servers_key in doc:
        out.append(((location.servers_key,), doc[location.servers_key]))
    for pattern in location.nested:
        nodes: list[tuple[tuple[str, ...], Any]] = [((), doc)]
        for part in pattern:
            step: list[tuple[tuple[str, ...], Any]] = []
            for path, node in nodes:
                if not isinstance(node, dict):
                    continue
                keys = list(node) if part == "*" else [part] if part in node else []
                step.extend((path + (key,), node[key]) for key in keys)
            nodes = step
        out.extend(nodes)
    return out


def resolve_client(name: str) -> str | None:
    """Map a client argument (any case) to its label; None when unsupported."""
    return CLIENT_ALIASES.get(name.lower())


def client_info(label: str) -> Client:
    return _BY_LABEL[label]


def client_names() -> str:
    """``claude, claude-code, cursor, ...``: the first alias of every client, for messages."""
    return ", ".join(c.aliases[0] for c in CLIENTS)


def current_home() -> str:
    """The user's home directory (``HOME`` first, as every client does)."""
    return os.path.expanduser("~")


_SCRIPT_NAMES = ("assay", "assay.exe")


def find_assay_script() -> str:
    """The `assay` script of this installation: the one running, else the one installed next to
    this interpreter, else the first on PATH, else the bare name. Config entries written by
    `config-path` and `protect` run this script, so a client starts the same assay you ran."""
    import shutil
    import sysconfig

    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0).lower() in _SCRIPT_NAMES and os.path.isfile(argv0):
        return os.path.abspath(argv0)
    for directory in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        for name in _SCRIPT_NAMES:
            candidate = os.path.join(directory or "", name)
            if directory and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    found = shutil.which("assay")
    return os.path.abspath(found) if found else "assay"
