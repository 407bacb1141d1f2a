"""The `assay` command line: parse, call the library, print. No logic lives here."""

from assay.cli.app import entry, main

__all__ = ["entry", "main"]
