"""What `assay mcp log` does with entries: filter, show each call once, format a table row or a
JSON line, count per tool and outcome (docs/log.md). Sans-IO: entries in, text out; the time a
``--since`` is measured from is given.
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

__all__ = ["Filter", "Once", "Stats", "Table", "Viewer", "admitted", "json_line", "APPROVAL_STATES"]

APPROVAL_STATES: Final = ("approved", "declined", "cancelled", "timed_out", "failed", "unavailable", "not_asked",
                          "required")
_KEYS: Final = ("time", "client", "server", "session", "tool", "outcome", "approval", "reason_code", "rule",
                "reason", "request_id", "arguments", "kind", "file")
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True)
class Filter:
    """``--server``/``--tool`` (tool-name patterns, docs/policy.md, "Tool-name patterns"; any
    of several), ``--outcome`` (an outcome, an approval state, or ``approval``: any call a
    person was asked about), ``--since`` (an instant in seconds since the epoch)."""

    servers: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    since: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "_servers", NameMatcher(self.servers) if self.servers else None)
        object.__setattr__(self, "_tools", NameMatcher(self.tools) if self.tools else None)
        known = (
            set(OUTCOMES) | set(APPROVAL_STATES) | {"approval", "inspected"} | set(INSPECT_ACTIONS)
            | {"would_" + a for a in INSPECT_ACTIONS}
        )
        for value in self.outcomes:
            if value not in known:
                raise ValueError(f"unknown outcome {value!r} (one of: {', '.join(sorted(known))})")

    def admits(self, entry: Entry) -> bool:
        servers: NameMatcher | None = self._servers  # type: ignore[attr-defined]
        tools: NameMatcher | None = self._tools  # type: ignore[attr-defined]
        if servers is not None and not servers(entry.server or ""):
            return False
        if tools is not None and not tools(entry.tool):
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
    Entries come in time order, so only the keys of the latest time are kept."""

    def __init__(self) -> None:
        self._time: str | None = None
        self._seen: dict[tuple[Any, ...], set[str]] = {}

    def first(self, entry: Entry) -> bool:
        if entry.time != self._time:
            self._time, self._seen = entry.time, {}
        kinds = self._seen.setdefault(entry.key(), set())
        if kinds and entry.kind not in kinds:
            kinds.add(entry.kind)
            return False  # the other record of a call already shown
        kinds.add(entry.kind)
        return True


def json_line(entry: Entry) -> str:
    """One object with every key of docs/log.md, "--json", in that order (``null`` when absent)."""
    doc = {key: getattr(entry, key) for key in _KEYS}
    if not entry.has_arguments:
        doc["arguments"] = None
    return _encoder.encode(doc).decode()


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
        where = entry.server or "-"
        if entry.client:
            where = f"{entry.client}/{where}"
        outcome = entry.outcome if entry.approval is None else f"{entry.outcome}:{entry.approval}"
        tail = entry.reason or ""
        if entry.has_arguments:
            shown = _encoder.encode(entry.arguments).decode()
            tail = f"{tail}  {shown}" if tail else shown
        cells = (_local(entry), where, entry.tool or '""', outcome, entry.reason_code or "-", entry.rule or "-", tail)
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


class Stats:
    """``--stats``: calls per tool and outcome, at most :attr:`MAX_TOOLS` tools (the rest are
    counted under ``(other tools)``: a log holds what a server named its tools)."""

    MAX_TOOLS: Final = 10_000

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {}

    def add(self, entry: Entry) -> None:
        if entry.kind == "inspected":  # a finding, not a call
            return
        tool = entry.tool
        if tool not in self.counts and len(self.counts) >= self.MAX_TOOLS:
            tool = "(other tools)"
        row = self.counts.setdefault(tool, {})
        row[entry.outcome] = row.get(entry.outcome, 0) + 1

    def lines(self, as_json: bool) -> Iterator[str]:
        if as_json:
            for tool in sorted(self.counts):
                yield _encoder.encode({"tool": tool, **{o: self.counts[tool].get(o, 0) for o in OUTCOMES},
                                       "total": sum(self.counts[tool].values())}).decode()
            return
        width = max([len("TOOL"), *(len(_printable(t)) for t in self.counts)])
        yield "  ".join(["TOOL".ljust(width), *(o.upper().rjust(len(o)) for o in OUTCOMES), "TOTAL"])
        total = dict.fromkeys(OUTCOMES, 0)
        for tool in sorted(self.counts):
            row = self.counts[tool]
            for o in OUTCOMES:
                total[o] += row.get(o, 0)
            yield "  ".join([_printable(tool).ljust(width), *(str(row.get(o, 0)).rjust(len(o)) for o in OUTCOMES),
                             str(sum(row.values())).rjust(5)])
        yield "  ".join(["(all)".ljust(width), *(str(total[o]).rjust(len(o)) for o in OUTCOMES),
                         str(sum(total.values())).rjust(5)])


def admitted(entries: Iterable[Entry], keep: Filter) -> Iterator[Entry]:
    """The entries ``keep`` admits, each call once."""
    once = Once()
    for entry in entries:
        if once.first(entry) and keep.admits(entry):
            yield entry


class Viewer:
    """What `assay mcp log` prints, entry by entry (docs/log.md): each admitted call once, as a
    table row, a JSON line, or counted for ``--stats``. The table's columns are fitted to the
    first :attr:`FIT_ROWS` rows, which are held until then (or until :meth:`end_of_files`)."""

    FIT_ROWS: Final = 1000

    def __init__(self, keep: Filter, *, mode: str = "table", width: int | None = None, colour: bool = False) -> None:
        if mode not in ("table", "json", "stats", "stats-json"):
            raise ValueError(f"unknown mode {mode!r}")
        self.keep, self.mode = keep, mode
        self.table, self.once, self.stats = Table(width, colour), Once(), Stats()
        self._first: list[Entry] | None = [] if mode == "table" else None

    def take(self, entry: Entry) -> str:
        """The text to print for ``entry`` (often nothing)."""
        if not (self.once.first(entry) and self.keep.admits(entry)):
            return ""
        if self.mode.startswith("stats"):
            self.stats.add(entry)
            return ""
        if self._first is not None:
            self._first.append(entry)
            return self._fitted() if len(self._first) >= self.FIT_ROWS else ""
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
        rows, self._first = self._first, None
        self.table.fit(self.table.cells(e) for e in rows)
        return "".join(f"{line}\n" for line in (self.table.header(), *map(self.table.row, rows)))
