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

from assay.clients.table import *  # noqa: F403  (the table's names, as its __all__ lists them)
from assay.clients.table import __all__ as __all__
