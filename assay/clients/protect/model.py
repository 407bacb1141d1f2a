"""The values of `assay mcp protect` (docs/protect.md): the error, the options of a protected
entry, what happened to each server, and protect's record of what it wrote (docs/protect.md,
"The record"). A leaf module."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ProtectError", "WrapOptions", "Change", "Result", "MemberEdit", "EntryRecord"]


class ProtectError(Exception):
    """The config cannot be edited safely (unparsable, odd shape, changed meanwhile); nothing
    was written. The message is one line."""


@dataclass(frozen=True)
class WrapOptions:
    """What goes before ``--`` in a protected entry (docs/protect.md, "What changes").

    ``observe`` is wrap's ``--dry-run`` (decide and log, block nothing); ``log_arguments`` its
    ``--log-arguments`` (docs/protect.md, "Logging arguments")."""

    assay: str
    policy: str
    log_dir: str | None = None
    observe: bool = False
    hide_denied_tools: bool = False
    declared_manifest: str | None = None
    log_arguments: bool = False


@dataclass(frozen=True)
class Change:
    """What happened to one server: ``wrapped``/``updated``/``unwrapped`` (changed),
    ``skipped`` (not protect's to change) or ``kept`` (protect's, but edited since, so left)."""

    name: str
    action: str
    detail: str
    where: str = ""
    remote: bool = False  # a remote (URL) entry, rewritten whole (docs/protect.md, "Remote servers")
    forced: bool = False  # undone with --force: unwrapped as it is now, not its original text

    @property
    def changed(self) -> bool:
        return self.action in ("wrapped", "updated", "unwrapped")


@dataclass(frozen=True)
class MemberEdit:
    """One value protect replaced in an entry (docs/protect.md, "The record").

    ``key`` is the member's path inside the entry (``("command",)``, ``("args",)``, or
    ``("command", "path")`` for Zed's older form). ``original`` is the exact text of the value
    before protect, ``written`` the exact text protect put in its place. ``original`` None means
    protect added the member: ``written`` is then the whole text it inserted right after the
    command value (``after == "value"``) or after the end of the command's line
    (``after == "line"``, TOML tables)."""

    key: tuple[str, ...]
    original: str | None
    written: str
    after: str = ""


@dataclass(frozen=True)
class EntryRecord:
    """The edits protect made to one server entry: ``map`` is the key path of its server map
    (``("mcpServers",)``), ``name`` the server's name in it."""

    map: tuple[str, ...]
    name: str
    edits: tuple[MemberEdit, ...]

    @property
    def key(self) -> tuple[tuple[str, ...], str]:
        return self.map, self.name


@dataclass
class Result:
    """The new text, one Change per server, and the record to keep for the file (None: the
    edit does not keep one)."""

    text: str
    changes: list[Change] = field(default_factory=list)
    record: list[EntryRecord] | None = None
    fallback: bool = False  # undo without a record (docs/protect.md, "Undo")

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.changes)
