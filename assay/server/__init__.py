"""`assay-mcp-server`: an MCP server over stdio exposing policy-check tools (docs/server.md)."""
