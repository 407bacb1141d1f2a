"""assay: a policy guard between AI agents and the MCP tools they call.

The public API for trio programs. Import from here; submodules are implementation detail.
"""

from assay._version import __version__
from assay.preflight import Phase, PreflightReport, preflight

__all__ = ["__version__", "preflight", "Phase", "PreflightReport"]
