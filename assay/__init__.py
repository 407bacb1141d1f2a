"""assay: a policy guard between AI agents and the MCP tools they call.

The public API for trio programs. Import from here; submodules are implementation detail.
The names below are loaded on first use, so `import assay` (every `assay` command starts with
it) costs nothing a command does not use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay._version import __version__

if TYPE_CHECKING:
    from assay.preflight import Phase, PreflightReport, preflight

__all__ = ["__version__", "preflight", "Phase", "PreflightReport"]
_LAZY = {"preflight": "assay.preflight", "Phase": "assay.preflight", "PreflightReport": "assay.preflight"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'assay' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
