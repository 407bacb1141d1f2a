"""Registry of command families, in the order `assay mcp --help` lists them (spec/cli.md §1)."""

from assay.cli import config_path, discover, kill, manifest, preflight, tool, wrap

FAMILIES = (wrap, preflight, manifest, discover, kill, config_path, tool)
