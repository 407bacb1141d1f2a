"""TOML (Codex CLI) with value spans (docs/protect.md, "Formatting and comments"). ``tomlkit``
finds the values: every ``command`` and ``args`` value of the server entries is swapped for a
unique marker in one copy of the document, which tomlkit writes back byte for byte around the
markers, so each marker's place is the value's place in the original text (checked against the
value's own text). Protect then replaces only those spans. Sans-IO."""

from __future__ import annotations

import re
import secrets
from typing import Any

from assay.clients import ConfigLocation
from assay.clients.protect.model import Adder, ProtectError, Slot
from assay.clients.protect.tomlremote import body_span
from assay.clients.protect.tomltext import blank_toml_comments, line_anchor

__all__ = ["toml_slots"]

_KEY_LINE = re.compile(r"([ \t]*(?:[^\n]*\.[ \t]*)?)(command|\"command\"|'command')([ \t]*=[ \t]*)\Z")


def _adder(text: str, entry: Any, span: tuple[int, int]) -> Adder | None:
    from tomlkit.items import InlineTable

    start, end = span
    if isinstance(entry, InlineTable):
        return Adder(end, ", args = ", "", "value")
    line_start = text.rfind("\n", 0, start) + 1
    m = _KEY_LINE.match(text[line_start:start])
    if m is None:
        return None
    at, eol = line_anchor(text, end)
    return Adder(at, eol + m.group(1) + "args" + m.group(3), "", "line")


def _quoted(dumped: str, marker: str) -> tuple[int, int] | None:
    """Where the string holding ``marker`` starts in ``dumped`` and how many quote characters
    open it, or None. tomlkit writes a replaced value in the quote style of the value it
    replaces in some versions (literal or multi-line quotes) and always in basic quotes in others."""
    at = dumped.find(marker)
    if at < 1 or dumped.count(marker) != 1:
        return None
    quote = dumped[at - 1]
    if quote not in ('"', "'"):
        return None
    n = 1
    while n < 3 and at - n - 1 >= 0 and dumped[at - n - 1] == quote:
        n += 1
    if dumped[at + len(marker) : at + len(marker) + n] != quote * n:
        return None
    return at - n, n


def toml_slots(text: str, location: ConfigLocation) -> tuple[str, list[Slot]]:
    import tomllib

    import tomlkit
    from tomlkit.exceptions import TOMLKitError
    from tomlkit.items import InlineTable

    try:
        tomllib.loads(text)
        doc = tomlkit.parse(text)
        marked = tomlkit.parse(text)
    except (TOMLKitError, ValueError) as exc:
        raise ProtectError(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise ProtectError("invalid TOML: nested too deeply") from None
    table = doc.get(location.servers_key)
    if table is None:
        return blank_toml_comments(text), []
    if not isinstance(table, dict):
        raise ProtectError(f'"{location.servers_key}" is not a table')
    token = secrets.token_hex(8)
    while token in text:
        token = secrets.token_hex(8)
    slots: list[Slot] = []
    wanted: list[tuple[Slot, str, str, str]] = []  # slot, key, marker, original value text
    for name in list(table.keys()):
        entry = table[name]
        raw = entry.unwrap() if hasattr(entry, "unwrap") else entry
        slot = Slot((location.servers_key,), name, raw)
        slots.append(slot)
        if not isinstance(entry, dict):
            continue
        for key in ("command", "args"):
            if key in entry:
                marker = f"assay-locate-{len(wanted)}-{token}"
                wanted.append((slot, key, marker, entry[key].as_string()))
                marked[location.servers_key][name][key] = marker
    dumped = tomlkit.dumps(marked)
    found = []
    for slot, key, marker, original in wanted:
        quotes = _quoted(dumped, marker)
        if quotes is None:
            raise ProtectError(f"cannot find the {key} of {slot.name!r} in the TOML text")
        found.append((quotes[0], len(marker) + 2 * quotes[1], slot, key, original))
    shift = 0
    for at, width, slot, key, original in sorted(found, key=lambda f: f[0]):
        start = at - shift
        if text[start : start + len(original)] != original:
            raise ProtectError(f"cannot find the {key} of {slot.name!r} in the TOML text")
        slot.spans[(key,)] = (start, start + len(original))
        shift += width - len(original)
    scan = blank_toml_comments(text)
    for slot in slots:
        if (
            isinstance(slot.raw, dict)
            and isinstance(table[slot.name], dict)
            and not isinstance(table[slot.name], InlineTable)
        ):
            body = body_span(text, scan, location.servers_key, slot.name)
            if body is not None:
                slot.spans[()] = body  # a remote entry is rewritten whole (docs/protect.md, "Remote servers")
        if ("command",) in slot.spans and ("args",) not in slot.spans:
            adder = _adder(text, table[slot.name], slot.spans[("command",)])
            if adder is not None:
                slot.adders[("args",)] = adder
    return scan, slots
