"""What `assay mcp log` does with entries: filter, show each call once, format a table row or a
JSON line, count per client, server, tool and outcome (docs/log.md). Sans-IO: entries in, text
out; the time a ``--since`` is measured from is given.

Memory is bounded in bytes whatever the files hold: the rows held to fit the table's columns
are capped in count and in bytes, :class:`Once` keeps hashes, and the counts of ``--stats`` keep
at most :attr:`Stats.MAX_ROWS` rows of names cut at :data:`NAME_MAX` characters.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import msgspec

from assay.logs.entries import INSPECT_ACTIONS, OUTCOMES, Entry
from assay.policy.patterns import NameMatcher
from assay.terminal import printable as _printable
from assay.terminal import printable_json

__all__ = [
    "Filter",
    "Once",
    "Stats",
    "Table",
    "Viewer",
    "admitted",
    "json_line",
    "where",
    "APPROVAL_STATES",
    "NAME_MAX",
]

APPROVAL_STATES: Final = (
    "approved",
    "declined",
    "cancelled",
    "timed_out",
    "failed",
    "unavailable",
    "not_asked",
    "required",
)
_KEYS: Final = (
    "time",
    "client",
    "server",
    "session",
    "tool",
    "outcome",
    "approval",
    "reason_code",
    "rule",
    "reason",
    "request_id",
    "arguments",
    "kind",
    "file",
    "error_code",
    "subject",
    "client_name",
    "client_version",
)
NAME_MAX: Final = 256  # characters of a name kept as a --stats key
_encoder = msgspec.json.Encoder()


def _encode(doc: Any) -> str:
    """``doc`` as one compact JSON line that every JSON reader reads the same way and a
    terminal shows as it is (:func:`assay.terminal.printable_json`). A lone surrogate (read
    from a line wrap wrote with ASCII escapes) has no UTF-8 form: the standard encoder keeps it,
    and it is escaped with the rest."""
    try:
        text = _encoder.encode(doc).decode()
    except UnicodeEncodeError:
        import json

        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    return printable_json(text)


def where(entry: Entry) -> str:
    """``<client>/<server>`` (the server alone when the client is not known): the table's
    SERVER column, and what ``--server <client pattern>/<server pattern>`` selects."""
    return _where(entry.client, entry.server)


def _where(client: str | None, server: str | None) -> str:
    return f"{client}/{server or '-'}" if client else server or "-"


@dataclass(frozen=True)
class Filter:
    """``--server``/``--tool``/``--client`` (tool-name patterns, docs/policy.md, "Tool-name
    patterns"; any of several), ``--outcome`` (an outcome, an approval state, or ``approval``:
    any call a person was asked about), ``--since`` (an instant in seconds since the epoch).
    A server pattern with a ``/`` is two patterns, the client's before the first ``/`` and the
    server's after it (``cursor/*``, ``*/git*``), or one for a server whose label has a ``/``;
    one without, a pattern for the server. A client pattern never matches a call whose client
    is not known."""

    servers: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    since: float | None = None
    clients: tuple[str, ...] = ()
    #: ``--subject``: exact subjects (a user's ``sub`` or an API key's id); a record without one
    #: never matches
    subjects: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        slashed = [p.split("/", 1) for p in self.servers if "/" in p]
        object.__setattr__(self, "_servers", NameMatcher(self.servers) if self.servers else None)
        object.__setattr__(self, "_pairs", tuple((NameMatcher([c]), NameMatcher([s])) for c, s in slashed))
        object.__setattr__(self, "_tools", NameMatcher(self.tools) if self.tools else None)
        object.__setattr__(self, "_clients", NameMatcher(self.clients) if self.clients else None)
        known = (
            set(OUTCOMES)
            | set(APPROVAL_STATES)
            | {"approval", "inspected"}
            | set(INSPECT_ACTIONS)
            | {"would_" + a for a in INSPECT_ACTIONS}
        )
        for value in self.outcomes:
            if value not in known:
                raise ValueError(f"unknown outcome {value!r} (one of: {', '.join(sorted(known))})")

    def admits(self, entry: Entry) -> bool:
        servers: NameMatcher | None = self._servers  # type: ignore[attr-defined]
        tools: NameMatcher | None = self._tools  # type: ignore[attr-defined]
        clients: NameMatcher | None = self._clients  # type: ignore[attr-defined]
        if servers is not None and not servers(entry.server or ""):
            pairs: tuple[tuple[NameMatcher, NameMatcher], ...] = self._pairs  # type: ignore[attr-defined]
            if not (entry.client and any(c(entry.client) and s(entry.server or "") for c, s in pairs)):
                return False
        if clients is not None and not (entry.client and clients(entry.client)):
            return False
        if tools is not None and not tools(entry.tool):
            return False
        if self.subjects and entry.subject not in self.subjects:
            return False
        if self.outcomes and not (
            entry.outcome in self.outcomes
            or entry.approval in self.outcomes
            or ("approval" in self.outcomes and entry.approval is not None)
            or ("inspected" in self.outcomes and entry.kind == "inspected")
        ):
            return False
        return self.since is None or (entry.at is not None and entry.at >= self.since)


class Once:
    """Shows a call once when both logs of its server are read: a decision event and an audit
    record with the same :meth:`Entry.key` are one call (wrap writes them with the same time).
    Entries come in time order, so only the keys of the latest time are kept, as hashes, and at
    most :attr:`MAX_KEYS` of them (a file of that many records of one instant is not wrap's: a
    call of it may then be shown twice, never hidden)."""

    MAX_KEYS: Final = 4096

    def __init__(self) -> None:
        self._time: str | None = None
        self._seen: dict[int, set[str]] = {}

    def first(self, entry: Entry) -> bool:
        if entry.time != self._time or len(self._seen) >= self.MAX_KEYS:
            self._time, self._seen = entry.time, {}
        kinds = self._seen.setdefault(hash(entry.key()), set())
        if kinds and entry.kind not in kinds:
            kinds.add(entry.kind)
            return False  # the other record of a call already shown
        kinds.add(entry.kind)
        return True


def json_line(entry: Entry) -> str:
    """One object with every key of docs/log.md, "--json", in that order (``null`` when absent),
    with every character a terminal or a JavaScript reader could act on escaped (:func:`_encode`)."""
    doc = {key: getattr(entry, key) for key in _KEYS}
    if not entry.has_arguments:
        doc["arguments"] = None
    return _encode(doc)


_COLOURS: Final = {"allow": "32", "allow_with_warning": "33", "would_deny": "33", "deny": "31"}
_CAPS: Final = (19, 28, 28, 28, 22, 30)  # the widest time, client/server, tool, outcome, code, rule shown
_HEADER: Final = ("TIME", "SERVER", "TOOL", "OUTCOME", "CODE", "RULE", "REASON / ARGUMENTS")
_OUTCOME: Final = 3


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


class Table:
    """Rows of the table. ``width`` is the terminal's (``None``: no line is shortened),
    ``colour`` colours the outcome. The columns are as wide as the widest cell of the rows
    given to :meth:`fit` (the first rows: the table is written as it is read), within caps
    (the caps until then)."""

    def __init__(self, width: int | None, colour: bool) -> None:
        self.width, self.colour = width, colour
        self.widths = list(_CAPS)

    def fit(self, rows: Iterable[tuple[str, ...]]) -> None:
        self.widths = [len(h) for h in _HEADER[:-1]]
        for cells in rows:
            for i, cap in enumerate(_CAPS):
                self.widths[i] = min(max(self.widths[i], len(cells[i])), cap)

    def header(self) -> str:
        return self.line(_HEADER, None)

    @staticmethod
    def cells(entry: Entry) -> tuple[str, ...]:
        """The row's cells, each :func:`assay.terminal.printable`. CODE is the code the client
        got (``E_PATH_CONFINEMENT``) when the record says it, else the record's reason code."""
        outcome = entry.outcome if entry.approval is None else f"{entry.outcome}:{entry.approval}"
        tail = entry.reason or ""
        if entry.has_arguments:
            shown = _encode(entry.arguments)
            tail = f"{tail}  {shown}" if tail else shown
        code = entry.error_code or entry.reason_code or "-"
        cells = (_local(entry), where(entry), entry.tool or '""', outcome, code, entry.rule or "-", tail)
        return tuple(_printable(c) for c in cells)

    def row(self, entry: Entry) -> str:
        return self.line(self.cells(entry), entry.outcome)

    def line(self, cells: Sequence[str], outcome: str | None) -> str:
        parts = [_cut(c, w).ljust(w) for c, w in zip(cells, self.widths)]
        line = ("  ".join(parts) + "  " + cells[-1]).rstrip()
        if self.width is not None:
            line = _cut(line, self.width)
        if self.colour and outcome in _COLOURS:
            start = sum(w + 2 for w in self.widths[:_OUTCOME])
            end = start + self.widths[_OUTCOME]
            line = f"{line[:start]}\x1b[{_COLOURS[outcome]}m{line[start:end]}\x1b[0m{line[end:]}"
        return line


def _local(entry: Entry) -> str:
    if entry.at is None:
        return entry.time
    return datetime.fromtimestamp(entry.at).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _kept(name: str | None) -> str | None:
    """A name as a --stats key: cut at :data:`NAME_MAX` characters (a log holds what a client or
    server chose, up to a line's size), the cut said."""
    if name is None or len(name) <= NAME_MAX:
        return name
    return f"{name[:NAME_MAX]}…(cut: {len(name)} characters)"


_OTHERS: Final = (None, None, "(other tools)")


class Stats:
    """``--stats``: calls per client, server, tool and outcome, at most :attr:`MAX_ROWS` rows
    (the calls of further ones are counted under ``(other tools)``: a log holds what clients
    and servers named their tools)."""

    MAX_ROWS: Final = 10_000

    def __init__(self) -> None:
        self.counts: dict[tuple[str | None, str | None, str], dict[str, int]] = {}

    def add(self, entry: Entry) -> None:
        if entry.kind == "inspected":  # a finding, not a call
            return
        key = (_kept(entry.client), _kept(entry.server), _kept(entry.tool) or "")
        if key not in self.counts and len(self.counts) >= self.MAX_ROWS:
            key = _OTHERS
        row = self.counts.setdefault(key, {})
        row[entry.outcome] = row.get(entry.outcome, 0) + 1

    def _keys(self) -> list[tuple[str | None, str | None, str]]:
        return sorted(self.counts, key=lambda k: (k == _OTHERS, k[0] or "", k[1] or "", k[2]))

    def lines(self, as_json: bool) -> Iterator[str]:
        keys = self._keys()
        if as_json:
            for key in keys:
                row = self.counts[key]
                yield _encode(
                    {
                        "client": key[0],
                        "server": key[1],
                        "tool": key[2],
                        **{o: row.get(o, 0) for o in OUTCOMES},
                        "total": sum(row.values()),
                    }
                )
            return
        groups: dict[str, list[tuple[str, dict[str, int]]]] = {}
        for key in keys:
            shown = "(others)" if key == _OTHERS else _printable(_where(key[0], key[1]))
            groups.setdefault(shown, []).append((_printable(key[2]), self.counts[key]))
        first = max([len("SERVER"), len("(all)"), *(len(g) for g in groups)])
        second = max([len("TOOL"), len("(all)"), *(len(t) for rows in groups.values() for t, _ in rows)])

        def line(server: str, tool: str, row: dict[str, int]) -> str:
            return "  ".join(
                [
                    server.ljust(first),
                    tool.ljust(second),
                    *(str(row.get(o, 0)).rjust(len(o)) for o in OUTCOMES),
                    str(sum(row.values())).rjust(5),
                ]
            )

        yield "  ".join(["SERVER".ljust(first), "TOOL".ljust(second), *(o.upper() for o in OUTCOMES), "TOTAL"])
        total: dict[str, int] = {}
        for server, rows in groups.items():
            subtotal: dict[str, int] = {}
            for tool, row in rows:
                yield line(server, tool, row)
                for o, n in row.items():
                    subtotal[o] = subtotal.get(o, 0) + n
                    total[o] = total.get(o, 0) + n
            if len(groups) > 1:
                yield line(server, "(all)", subtotal)
        yield line("(all)", "(all)", total)


def admitted(entries: Iterable[Entry], keep: Filter) -> Iterator[Entry]:
    """The entries ``keep`` admits, each call once."""
    once = Once()
    for entry in entries:
        if once.first(entry) and keep.admits(entry):
            yield entry


class Viewer:
    """What `assay mcp log` prints, entry by entry (docs/log.md): each admitted call once, as a
    table row, a JSON line, or counted for ``--stats``. The table's columns are fitted to the
    first :attr:`FIT_ROWS` rows, whose cells are held until then (or until
    :meth:`end_of_files`), or until they hold :attr:`FIT_BYTES` characters."""

    FIT_ROWS: Final = 1000
    FIT_BYTES: Final = 4 * 1024 * 1024

    def __init__(self, keep: Filter, *, mode: str = "table", width: int | None = None, colour: bool = False) -> None:
        if mode not in ("table", "json", "stats", "stats-json"):
            raise ValueError(f"unknown mode {mode!r}")
        self.keep, self.mode = keep, mode
        self.table, self.once, self.stats = Table(width, colour), Once(), Stats()
        self._first: list[tuple[tuple[str, ...], str]] | None = [] if mode == "table" else None
        self._held = 0

    def take(self, entry: Entry) -> str:
        """The text to print for ``entry`` (often nothing)."""
        if not (self.once.first(entry) and self.keep.admits(entry)):
            return ""
        if self.mode.startswith("stats"):
            self.stats.add(entry)
            return ""
        if self._first is not None:
            cells = self.table.cells(entry)
            self._first.append((cells, entry.outcome))
            self._held += sum(map(len, cells))
            return self._fitted() if len(self._first) >= self.FIT_ROWS or self._held >= self.FIT_BYTES else ""
        return (json_line(entry) if self.mode == "json" else self.table.row(entry)) + "\n"

    def end_of_files(self) -> str:
        """The text held until the files were read to their end: the table's first rows (with
        its header), or the counts."""
        if self.mode.startswith("stats"):
            return "".join(line + "\n" for line in self.stats.lines(self.mode == "stats-json"))
        return self._fitted()

    def _fitted(self) -> str:
        if self._first is None:
            return ""
        rows, self._first, self._held = self._first, None, 0
        self.table.fit(cells for cells, _ in rows)
        return "".join(f"{line}\n" for line in (self.table.header(), *(self.table.line(c, o) for c, o in rows)))
