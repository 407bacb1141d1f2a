"""A minimal MCP client over stdio, for `assay mcp tools` (docs/tools.md): start a server,
``initialize``, ``tools/list`` through every page, end the server.

- :mod:`~assay.mcpclient.protocol`: the conversation, sans-IO (lines in, lines out);
- :mod:`~assay.mcpclient.tooldefs`: a listed tool read into plain values, and printed;
- :mod:`~assay.mcpclient.run`: the thin trio shell (the child through :mod:`assay.proc`,
  under a deadline, always ended and reaped);
- :mod:`~assay.mcpclient.launch`: which servers a client config starts, and how;
- :mod:`~assay.mcpclient.report`: what is printed for each server.
"""
