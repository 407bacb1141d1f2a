"""Registry of command families, in the order `assay mcp --help` lists them (the command table of README.md)."""

from assay.cli import (
    approvals,
    auth,
    config_path,
    discover,
    kill,
    log,
    manifest,
    policy,
    preflight,
    protect,
    serve,
    session,
    tool,
    tools,
    wrap,
)

FAMILIES = (
    wrap,
    preflight,
    manifest,
    discover,
    kill,
    config_path,
    protect,
    tool,
    session,
    auth,
    log,
    tools,
    policy,
    serve,
    approvals,
)
