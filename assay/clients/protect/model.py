"""The values of `assay mcp protect` (docs/protect.md): the error, the options of a protected
entry, what happened to each server, protect's record of what it wrote (docs/protect.md,
"The record"), where the values it edits sit in a config's text (:class:`Slot`, found by
:mod:`assay.clients.protect.slots`) and a remote entry as read (:class:`Remote`, by
:mod:`assay.clients.protect.remote`). A leaf module: the JSON and TOML readers and writers all
build on it, none on another's types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ProtectError",
    "WrapOptions",
    "Change",
    "Result",
    "MemberEdit",
    "EntryRecord",
    "Slot",
    "Adder",
    "Member",
    "Remote",
    "HOLE",
]


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


# -- where the values protect edits sit (found by assay.clients.protect.slots) ---------------

Path = tuple[str, ...]


@dataclass(frozen=True)
class Adder:
    """How to add an ``args`` member that is not there: insert ``prefix + array + suffix`` at
    ``at``; ``after`` is ``value`` (right after the command value) or ``line`` (at the end of
    the command's line); ``indent`` is the items' indentation of a multi-line array (None: one
    line) and ``close`` the indentation of its closing bracket."""

    at: int
    prefix: str
    suffix: str
    after: str
    indent: str | None = None
    close: str = ""
    eol: str = "\n"


@dataclass
class Slot:
    map: Path
    name: str
    raw: Any
    spans: dict[Path, tuple[int, int]] = field(default_factory=dict)
    adders: dict[Path, Adder] = field(default_factory=dict)
    members: list[Member] | None = None  # the entry's members (JSON objects): a remote entry is rewritten whole


@dataclass(frozen=True)
class Member:
    """One member of a server entry: where its key starts and its value sits; for an object
    value, its own members (``headers``)."""

    key: str
    start: int
    value: tuple[int, int]
    inner: tuple["Member", ...] | None = None


# -- a remote entry, read (assay.clients.protect.remote) -------------------------------------

HOLE = "\x00"


@dataclass(frozen=True)
class Remote:
    """A remote entry, read: the member holding the URL, the URL, whether it names the legacy
    HTTP+SSE transport, and its headers (name, value) in file order. Codex only: the headers
    whose values it reads from its own environment (``env_http_headers``: name, variable) and
    the variable of its bearer token (``bearer_token_env_var``)."""

    url_key: str
    url: str
    sse: bool
    headers: tuple[tuple[str, str], ...]
    env_headers: tuple[tuple[str, str], ...] = ()
    bearer_env: str | None = None

    @property
    def forwarded(self) -> list[str]:
        """The variables the wrapped entry must be given from the client's environment (Codex's
        ``env_vars``), each once, in the order of the wrap line."""
        names = [var for _, var in self.env_headers] + ([self.bearer_env] if self.bearer_env else [])
        return list(dict.fromkeys(names))
