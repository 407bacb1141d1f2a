"""The check after every edit of `assay mcp protect` (docs/protect.md, "Safety of the write"):
the new text is read as the client reads it, and it must hold the same settings as the old text
except for the values the edit meant to change, which must hold what it meant to write. A span
edit that went wrong is refused, never written. Sans-IO."""

from __future__ import annotations

import copy
import json
from typing import Any

from assay.clients import ConfigLocation
from assay.discover import strip_jsonc
from assay.clients.protect.model import ProtectError

__all__ = ["ABSENT", "load", "value_of", "check_edit"]

ABSENT = object()  # the member is not there


def load(text: str, location: ConfigLocation) -> Any:
    """The settings of a config's text, read as the client reads them."""
    if location.toml:
        import tomllib

        return tomllib.loads(text)
    body = text[1:] if text.startswith("\ufeff") else text
    return json.loads(strip_jsonc(body) if location.jsonc else body)


def value_of(text: str, toml: bool) -> Any:
    """The value of one value's text (a string or an array, JSON with comments or TOML)."""
    if toml:
        import tomllib

        return tomllib.loads("v = " + text)["v"]
    return json.loads(strip_jsonc(text))


def _map(doc: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


Members = dict[tuple[str, ...], Any]
"""An entry's members as set by an edit: ``{key path: value or ABSENT}`` (``()``: the whole entry)."""
Expect = dict[tuple[tuple[str, ...], str], Members]
"""The edits of one file: ``{(map path, entry name): members}``."""


def check_edit(before: str, after: str, location: ConfigLocation, expect: Expect) -> None:
    """ProtectError unless ``after`` reads as ``before`` with, for every ``(map, name)`` of
    ``expect``, the members ``{key path: value or ABSENT}`` set as given (key ``()``: the whole
    entry)."""
    try:
        old, new = load(before, location), load(after, location)
        want = copy.deepcopy(old)
        for (path, name), members in expect.items():
            table = _map(want, path)
            entry = table[name]
            for key, value in members.items():
                if key == ():  # the whole entry (a remote one: docs/protect.md, "Remote servers")
                    table[name] = entry = value
                    continue
                holder = entry
                for part in key[:-1]:
                    holder = holder[part]
                if value is ABSENT:
                    holder.pop(key[-1], None)
                else:
                    holder[key[-1]] = value
    except (ValueError, KeyError, TypeError) as exc:
        raise ProtectError(f"the edited text does not read back ({exc}); nothing was written") from None
    except RecursionError:
        raise ProtectError("the edited text does not read back (nested too deeply); nothing was written") from None
    if new != want:
        names = ", ".join(sorted(json.dumps(n, ensure_ascii=False) for _, n in expect))
        raise ProtectError(f"the edit of {names} does not read back as intended; nothing was written")
