"""JSON-line logging on stderr (docs/server.md, "Logging").

One event is one line `{"timestamp","level","fields":{"event",...},"target"}`; stdout never sees
a log line. The filter follows ASSAY_LOG: a level, or `target=level` directives separated by
commas (the longest matching target prefix wins); anything unparsable counts as `info`.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from typing import Any, BinaryIO

from assay.jsonwrite import dumps
from assay.server.jsontext import plain_json

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1

__all__ = [
    "Logger",
    "Prepared",
    "Preencoded",
    "parse_filter",
    "encode_event",
    "TARGET_MAIN",
    "TARGET_SERVER",
    "TARGET_BILLING",
]

TARGET_MAIN = "assay_mcp_server"
TARGET_SERVER = "assay_mcp_server::server"
TARGET_BILLING = "assay_billing"

_LEVELS = {"trace": 0, "debug": 1, "info": 2, "warn": 3, "warning": 3, "error": 4, "off": 5}
_NAMES = {"DEBUG": 1, "INFO": 2, "WARN": 3, "ERROR": 4}


def parse_filter(spec: str | None) -> tuple[int, tuple[tuple[str, int], ...]]:
    """(default level, ((target, level), ...)); an invalid spec gives plain `info`."""
    default = _LEVELS["info"]
    if not spec or not spec.strip():
        return default, ()
    targets: list[tuple[str, int]] = []
    seen_default = None
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" in part:
            target, _, level = part.partition("=")
            target, level = target.strip(), level.strip().lower()
            if not target or level not in _LEVELS:
                return default, ()
            targets.append((target, _LEVELS[level]))
        else:
            if part.lower() not in _LEVELS:
                return default, ()
            seen_default = _LEVELS[part.lower()]
    targets.sort(key=lambda item: len(item[0]), reverse=True)
    return (default if seen_default is None else seen_default), tuple(targets)


def _dumps(obj: Any) -> str:
    try:
        return dumps(obj)  # a lone surrogate stays in the text: encode_event escapes it
    except (OverflowError, TypeError, ValueError, RecursionError):
        # A value JSON cannot hold: written with its str().
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), default=str)


_second: tuple[int, str] = (-1, "")


def _second_text(sec: int) -> tuple[int, str]:
    """``(sec, "YYYY-MM-DDTHH:MM:SS")`` for a Unix second, remembered until the next second."""
    global _second
    cached = _second
    if cached[0] != sec:
        cached = _second = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))
    return cached


def _timestamp() -> str:
    """Now, UTC, `YYYY-MM-DDTHH:MM:SS.ffffffZ`; the date part is formatted once per second."""
    sec, ns = divmod(time.time_ns(), 1_000_000_000)
    return "%s.%06dZ" % (_second_text(sec)[1], ns // 1000)


def encode_event(level: str, target: str, fields: dict[str, Any], now: datetime | None = None) -> bytes:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if now is not None else _timestamp()
    # `level` and `target` are this module's constants (plain ASCII names): only `fields` needs
    # encoding, and the line keeps the key order timestamp, level, fields, target.
    line = '{"timestamp":"%s","level":"%s","fields":%s,"target":"%s"}' % (stamp, level, _dumps(fields), target)
    return line.encode("utf-8", "backslashreplace") + b"\n"


class Preencoded:
    """A field value with its JSON text computed once (e.g. a decision record used by many calls).

    ``text`` is what :func:`encode_event` writes for ``value`` on a line that needs no fallback
    encoding, or None when the value is not plain JSON (such a line takes the generic path)."""

    __slots__ = ("value", "text")

    def __init__(self, value: Any) -> None:
        self.value = value
        try:
            self.text: str | None = dumps(value)
        except (OverflowError, TypeError, ValueError, RecursionError):
            self.text = None


def _plain(value: Any) -> str | None:
    """The text of a value that :func:`_dumps` spells alike on every line and that cannot make a
    line fall back (see :func:`~assay.server.jsontext.plain_json`), or of a :class:`Preencoded`;
    None for anything else."""
    if type(value) is Preencoded:
        return value.text
    return plain_json(value)


def _encode_into(texts: list[Any], values: tuple[Any, ...]) -> bool:
    """Append the plain texts of ``values``; False as soon as one is not plain."""
    for value in values:
        kind = type(value)
        if kind is str and value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            texts.append('"' + value + '"')  # the common cases of _plain, inline
        elif kind is int and _I64_MIN <= value <= _I64_MAX:
            texts.append(str(value))
        else:
            text = _plain(value)
            if text is None:
                return False
            texts.append(text)
    return True


def _stamp_into(texts: list[Any]) -> None:
    """Append now as the template's `%s.%06d` pair, spelled as :func:`_timestamp` spells it."""
    now = time.time_ns()
    sec = now // 1_000_000_000
    cached = _second
    if cached[0] != sec:
        cached = _second_text(sec)
    texts.append(cached[1])
    texts.append(now // 1000 % 1_000_000)


class Prepared:
    """One event shape: level, target, event name and field names, in the order they are written.

    The constant text around the values is built once; :meth:`Logger.emit` only fills in the
    timestamp and the values, and the line is byte for byte what :meth:`Logger.event` writes for
    the same event and fields."""

    __slots__ = ("level", "target", "event", "names", "fixed", "key", "template", "_pairs")

    def __init__(
        self, level: str, target: str, event: str, names: tuple[str, ...], fixed: tuple[tuple[str, Any], ...] = ()
    ) -> None:
        """``fixed``: (name, value) fields every such event has, written before ``names``; each
        value must be plain (see :func:`_plain`)."""
        self.level, self.target, self.event, self.names, self.fixed = level, target, event, names, fixed
        self.key = (level, target)
        self._pairs: dict[Prepared, str] = {}

        def lit(text: str) -> str:
            return text.replace("%", "%%")

        head = '{"timestamp":"%s.%06dZ",' + lit('"level":"%s","fields":{"event":%s' % (level, _dumps(event)))
        for name, value in fixed:
            text = _plain(value)
            if text is None:
                raise ValueError("a fixed field needs a plain value")
            head += lit("," + _dumps(name) + ":" + text)
        body = "".join(lit("," + _dumps(name) + ":") + "%s" for name in names)
        self.template = head + body + lit('},"target":"%s"}' % target) + "\n"

    def fields(self, values: tuple[Any, ...]) -> dict[str, Any]:
        """The event's fields for ``values``, as :meth:`Logger.event` takes them."""
        fields = dict(self.fixed)
        for name, value in zip(self.names, values):
            fields[name] = value.value if type(value) is Preencoded else value
        return fields

    def pair_template(self, second: Prepared) -> str:
        """This template followed by ``second``'s, built once per pair."""
        template = self._pairs.get(second)
        if template is None:
            template = self._pairs[second] = self.template + second.template
        return template


class Logger:
    """Thread-safe: tool handlers run in worker threads and may log cache events.

    With a ``stream`` each event is written at once (start-up, before serving). With
    ``buffered=True`` events are only queued as encoded lines: the serving loop collects them with
    :meth:`drain` and writes them itself, so the protocol code that logs does no I/O.
    """

    def __init__(self, stream: BinaryIO | None, spec: str | None = "info", *, buffered: bool = False) -> None:
        self._stream = stream
        self._default, self._targets = parse_filter(spec)
        self._lock = threading.Lock()
        self._pending: list[bytes] | None = [] if buffered else None
        self._enabled: dict[tuple[str, str], bool] = {}
        self.records: list[dict[str, Any]] | None = None  # set to a list to keep events in memory

    def drain(self) -> bytes:
        """The queued lines (buffered mode), oldest first, removed from the queue. The list is
        never swapped, only its head cut, so a worker thread appending meanwhile loses nothing."""
        pending = self._pending
        if not pending:
            return b""
        n = len(pending)
        lines = pending[:n]
        del pending[:n]
        return b"".join(lines)

    def enabled(self, level: str, target: str) -> bool:
        got = self._enabled.get((level, target))
        if got is None:
            got = self._enabled[(level, target)] = self._decide(level, target)
        return got

    def _decide(self, level: str, target: str) -> bool:
        wanted = self._default
        for prefix, lvl in self._targets:
            if target == prefix or target.startswith(prefix + "::"):
                wanted = lvl
                break
        return _NAMES[level] >= wanted

    def emit(self, prepared: Prepared, *values: Any) -> None:
        """The event ``prepared`` with ``values`` for its field names: the same line as
        :meth:`event`, built from the prepared text when every value is plain (see
        :func:`_plain`), else through :meth:`event`."""
        on = self._enabled.get(prepared.key)
        if on is None:
            on = self.enabled(prepared.level, prepared.target)
        if not on:
            return
        pending = self._pending
        if pending is not None and self.records is None:
            now = time.time_ns()  # the timestamp as _timestamp() spells it
            sec = now // 1_000_000_000
            cached = _second
            if cached[0] != sec:
                cached = _second_text(sec)
            texts: list[Any] = [cached[1], now // 1000 % 1_000_000]
            for value in values:
                kind = type(value)
                if kind is str and value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
                    texts.append('"' + value + '"')  # the common cases of _plain, inline
                elif kind is int and _I64_MIN <= value <= _I64_MAX:
                    texts.append(str(value))
                else:
                    text = _plain(value)
                    if text is None:
                        break
                    texts.append(text)
            else:
                pending.append((prepared.template % tuple(texts)).encode("utf-8", "backslashreplace"))
                return
        self.event(prepared.level, prepared.target, prepared.event, **prepared.fields(values))

    def emit_pair(
        self, first: Prepared, first_values: tuple[Any, ...], second: Prepared, second_values: tuple[Any, ...]
    ) -> None:
        """``emit(first, *first_values)`` then ``emit(second, *second_values)``: the same two
        lines, each with its own timestamp, queued with one format and one append."""
        pending = self._pending
        enabled = self._enabled
        if pending is not None and self.records is None and enabled.get(first.key) and enabled.get(second.key):
            texts: list[Any] = []
            _stamp_into(texts)
            if _encode_into(texts, first_values):
                _stamp_into(texts)
                if _encode_into(texts, second_values):
                    pending.append((first.pair_template(second) % tuple(texts)).encode("utf-8", "backslashreplace"))
                    return
        self.emit(first, *first_values)
        self.emit(second, *second_values)

    def event(self, level: str, target: str, event: str, **fields: Any) -> None:
        on = self._enabled.get((level, target))
        if on is None:
            on = self.enabled(level, target)
        if not on:
            return
        payload = {"event": event, **fields}
        data = encode_event(level, target, payload)
        if self._pending is not None and self.records is None:
            self._pending.append(data)  # list.append is atomic; drain only cuts the list's head
            return
        with self._lock:
            if self.records is not None:
                self.records.append({"level": level, "target": target, "fields": payload})
            if self._pending is not None:
                self._pending.append(data)
            elif self._stream is not None:
                try:
                    self._stream.write(data)
                    self._stream.flush()
                except (OSError, ValueError):
                    pass  # a closed stderr must never take the server down
