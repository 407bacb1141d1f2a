"""Warnings about schemas that load but will not work as meant (docs/policy.md, "Schemas").

:func:`unresolvable_refs`: ``$ref`` values that are never fetched (the tool's schema will not
compile); :func:`slow_patterns`: regexes that need the backtracking engine and are not anchored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from assay.policy.reader import join

__all__ = ["unresolvable_refs", "slow_patterns"]


def _schema_objects(schemas: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """Every object inside the schemas, once each (a YAML alias is walked once), with its
    dotted path (``schemas.read_file.properties.path``)."""
    stack: list[tuple[Any, str]] = [(v, f"schemas.{k}") for k, v in schemas.items()]
    seen: set[int] = set()
    while stack:
        item, where = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            yield item, where
            stack.extend((v, join(where, k)) for k, v in item.items() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item) if isinstance(v, (dict, list)))


def unresolvable_refs(schemas: dict[str, Any]) -> list[str]:
    """Every ``$ref`` that is not a reference inside the schema (``#...``): remote, ``file:``
    and relative references are never fetched, so the tool's schema will not compile."""
    return sorted(
        f"{where}.$ref"
        for item, where in _schema_objects(schemas)
        if isinstance(item.get("$ref"), str) and not item["$ref"].startswith("#")
    )


_BACKTRACKING = re.compile(r"\(\?<?[=!]|\\[1-9]|\\k<")  # lookaround, a backreference


def slow_patterns(schemas: dict[str, Any]) -> list[str]:
    """Schema regexes (``pattern`` values, ``patternProperties`` names) that need the
    backtracking engine (lookaround, backreferences) and are not anchored with ``^``: such a
    search can take seconds on a long argument (docs/policy.md, "Schemas")."""
    found: list[str] = []
    for item, where in _schema_objects(schemas):
        regexes = [(item["pattern"], f"{where}.pattern")] if isinstance(item.get("pattern"), str) else []
        props = item.get("patternProperties")
        if isinstance(props, dict):
            regexes += [(k, f"{where}.patternProperties") for k in props if isinstance(k, str)]
        found += [
            f"{at}: {json.dumps(rx, ensure_ascii=False)} uses lookaround or a backreference and is not "
            "anchored with ^: checking a long argument can take seconds while every frame waits"
            for rx, at in regexes
            if not rx.startswith("^") and _BACKTRACKING.search(rx)
        ]
    return sorted(found)
