"""The one version of the project (DECISIONS D1): every command and the server report it."""

__version__ = "0.1.0"
