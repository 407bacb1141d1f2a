"""`assay-mcp-server`: an MCP server over stdio exposing policy-check tools (spec/server.md)."""
