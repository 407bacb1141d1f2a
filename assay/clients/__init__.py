"""The client-config room (docs/protect.md, docs/discover.md): everything about the config files
of MCP clients, in one package.

- :mod:`~assay.clients.table`: each client's file format and locations (the client table);
  its names are re-exported here (``from assay.clients import ConfigLocation``);
- :mod:`~assay.clients.wrapped`: the one reader of a wrapped command line (is this entry under
  `assay mcp wrap`, with which options, around which server?), asked by protect and discover;
- :mod:`~assay.clients.configs`: discover's config side (the servers a config file lists);
- :mod:`~assay.clients.protect`: `assay mcp protect` and ``--undo`` (edits, the record,
  backups, the file layer).

Nothing here imports the CLI.
"""

from assay.clients.table import (
    CLIENT_ALIASES,
    CLIENTS,
    Client,
    ConfigLocation,
    client_info,
    client_locations,
    client_names,
    config_dir,
    config_locations,
    current_home,
    current_platform,
    find_assay_script,
    pick_location,
    resolve_client,
    server_maps,
    user_config_path,
)

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
