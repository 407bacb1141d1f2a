"""The HTTP front of `assay mcp serve` (docs/serve.md): hypercorn on trio, both protocol eras at
/mcp, identity; it hands checked JSON-RPC messages to a :class:`assay.gateway.contract.Gateway`."""
