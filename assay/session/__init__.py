"""The sans-IO agent session core: no trio, no sockets, no files (docs/architecture.md)."""
