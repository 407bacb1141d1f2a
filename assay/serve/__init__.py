"""`assay mcp serve` put together (docs/serve.md): the HTTP front, one agent session per user
across the upstream servers (each behind the guard, as in wrap), the store and identity."""
