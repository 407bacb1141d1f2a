"""The one version of the project (docs/compatibility.md, "Whole toolkit"): every command and the server report it."""

__version__ = "0.1.0"
