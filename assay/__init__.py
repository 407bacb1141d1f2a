"""assay: a policy guard between AI agents and the MCP tools they call.

The public API for trio programs. Import from here; submodules are implementation detail.
The names below are loaded on first use, so `import assay` (every `assay` command starts with
it) costs nothing a command does not use.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from assay._version import __version__

if TYPE_CHECKING:
    from assay.preflight import Phase, PreflightReport, preflight

__all__ = ["__version__", "preflight", "Phase", "PreflightReport"]


def _from_preflight(name: str) -> Any:
    import importlib

    return getattr(importlib.import_module("assay.preflight"), name)


class _Package(types.ModuleType):
    # `assay.preflight` is the function, as it always was, even though a submodule of the same
    # name exists: importing that submodule sets this attribute, and the setter ignores it.
    @property
    def preflight(self) -> Any:
        return _from_preflight("preflight")

    @preflight.setter
    def preflight(self, _value: Any) -> None:
        pass


def __getattr__(name: str) -> Any:
    if name in ("Phase", "PreflightReport"):
        return _from_preflight(name)
    raise AttributeError(f"module 'assay' has no attribute {name!r}")


sys.modules[__name__].__class__ = _Package
