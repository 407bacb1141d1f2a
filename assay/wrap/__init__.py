"""`assay mcp wrap`: the stdio relay that guards MCP tool calls with an Assay policy."""
