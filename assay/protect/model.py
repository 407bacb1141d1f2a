"""The values of `assay mcp protect` (docs/protect.md): the error, the options of a protected
entry, and what happened to each server. A leaf module."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ProtectError", "WrapOptions", "Change", "Result"]


class ProtectError(Exception):
    """The config cannot be edited safely (unparsable, odd shape, changed meanwhile); nothing
    was written. The message is one line."""


@dataclass(frozen=True)
class WrapOptions:
    """What goes before ``--`` in a protected entry."""

    assay: str
    policy: str
    log_dir: str | None = None


@dataclass(frozen=True)
class Change:
    """What happened to one server: ``wrapped``/``unwrapped`` (changed) or ``skipped``."""

    name: str
    action: str
    detail: str
    where: str = ""

    @property
    def changed(self) -> bool:
        return self.action in ("wrapped", "unwrapped")


@dataclass
class Result:
    text: str
    changes: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.changes)
