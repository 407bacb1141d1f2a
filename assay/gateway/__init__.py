"""The sans-IO core of `assay mcp serve` (docs/serve.md): the config, who is asking, and what the
HTTP front asks of the gateway behind it. No trio, no sockets, no files."""
