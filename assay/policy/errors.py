"""The one exception the policy loader raises, with the classes of docs/policy.md, "Loading"."""

from __future__ import annotations

from typing import Any

__all__ = ["PolicyError", "KINDS"]

KINDS = ("syntax", "root_not_mapping", "structure", "validation")

# The server surfaces never echo parser text, only one of three lines (docs/server.md, "Shared
# rules": parse errors).
_SERVER_MESSAGES = {
    "syntax": "Policy YAML is invalid",
    "root_not_mapping": "Policy root must be a mapping",
    "structure": "Policy structure is invalid",
    "validation": "Policy structure is invalid",
}


class PolicyError(ValueError):
    """A policy file the loader refuses.

    ``kind`` is one of :data:`KINDS`; ``line``/``column`` are 1-based and set only for syntax
    errors whose position is known; ``detail`` is the message without the source prefix.
    ``str(e)`` is one line that names the source (and the position, compiler style), so a CLI
    can print it as is.
    """

    def __init__(
        self,
        kind: str,
        detail: str,
        *,
        source: str = "assay.yaml",
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown PolicyError kind {kind!r}")
        detail = " ".join(str(detail).split())
        self.kind = kind
        self.detail = detail
        self.source = source
        self.line = line if kind == "syntax" else None
        self.column = column if kind == "syntax" else None
        where = source
        if self.line is not None and self.column is not None:
            where = f"{source}:{self.line}:{self.column}"
        super().__init__(f"{where}: {detail}")

    def server_error(self) -> dict[str, Any]:
        """The ``error`` object of the server tools (docs/server.md, "Shared rules" and "Error catalogue")."""
        err: dict[str, Any] = {"code": "E_POLICY_PARSE", "message": _SERVER_MESSAGES[self.kind]}
        if self.kind == "syntax" and self.line and self.column and self.line > 0 and self.column > 0:
            err["details"] = {"line": self.line, "column": self.column}
        return err
