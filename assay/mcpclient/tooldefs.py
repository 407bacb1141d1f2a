"""A listed tool as plain values, and how `assay mcp tools` prints it (docs/tools.md,
"Output"). Sans-IO. Everything here comes from the server: text shown on a terminal has its
control characters escaped, and odd shapes (a schema that is not an object, hints that are not
booleans) are read as absent, never as errors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["HINTS", "Argument", "ToolInfo", "describe", "json_line", "text_lines"]

# MCP ToolAnnotations hint -> the key of --json's "annotations"
HINTS = (
    ("readOnlyHint", "read_only"),
    ("destructiveHint", "destructive"),
    ("idempotentHint", "idempotent"),
    ("openWorldHint", "open_world"),
)


def safe(text: Any, limit: int = 300) -> str:
    """One printable line of at most ``limit`` characters."""
    value = " ".join(str(text).split())
    if not value.isprintable():
        value = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in value)
    return value if len(value) <= limit else value[: limit - 3] + "..."


@dataclass(frozen=True)
class Argument:
    name: str
    type: str
    required: bool
    description: str | None


@dataclass(frozen=True)
class ToolInfo:
    name: str
    title: str | None
    description: str | None
    annotations: dict[str, bool | None]
    arguments: tuple[Argument, ...]
    has_schema: bool


def _type(schema: Any, depth: int = 0) -> str:
    if not isinstance(schema, dict) or depth > 3:
        return "any"
    t = schema.get("type")
    if isinstance(t, list):
        return "|".join(str(x) for x in t) or "any"
    if t == "array":
        items = schema.get("items")
        return f"array of {_type(items, depth + 1)}" if isinstance(items, dict) else "array"
    if isinstance(t, str):
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return f"{t} ({'|'.join(json.dumps(v) for v in enum[:8])}{'|...' if len(enum) > 8 else ''})"
        return t
    if isinstance(schema.get("enum"), list):
        return "enum " + "|".join(json.dumps(v) for v in schema["enum"][:8])
    for key in ("anyOf", "oneOf"):
        alts = schema.get(key)
        if isinstance(alts, list) and alts:
            return "|".join(_type(a, depth + 1) for a in alts)
    if "const" in schema:
        return f"const {json.dumps(schema['const'])}"
    return "any"


def describe(tool: dict[str, Any]) -> ToolInfo:
    """A tools/list entry read into a :class:`ToolInfo`."""
    got = tool.get("annotations")
    ann: dict[str, Any] = got if isinstance(got, dict) else {}
    hints = {key: (ann.get(hint) if isinstance(ann.get(hint), bool) else None) for hint, key in HINTS}
    title = tool.get("title") if isinstance(tool.get("title"), str) else ann.get("title")
    schema = tool.get("inputSchema")
    args: list[Argument] = []
    if isinstance(schema, dict):
        found, needed = schema.get("properties"), schema.get("required")
        props: dict[str, Any] = found if isinstance(found, dict) else {}
        required: list[Any] = needed if isinstance(needed, list) else []
        for name, prop in props.items():
            desc = (
                prop.get("description") if isinstance(prop, dict) and isinstance(prop.get("description"), str) else None
            )
            args.append(Argument(str(name), _type(prop), name in required, desc))
    description = tool.get("description")
    return ToolInfo(
        tool["name"],
        title if isinstance(title, str) else None,
        description if isinstance(description, str) else None,
        hints,
        tuple(args),
        isinstance(schema, dict),
    )


def _hint_words(hints: dict[str, bool | None]) -> list[str]:
    words = []
    if hints["read_only"]:
        words.append("read-only")
    if hints["destructive"] is not None and not hints["read_only"]:
        words.append("destructive" if hints["destructive"] else "not destructive")
    if hints["idempotent"]:
        words.append("idempotent")
    if hints["open_world"] is not None:
        words.append("open-world" if hints["open_world"] else "closed-world")
    return words


def text_lines(info: ToolInfo, policy: dict[str, Any] | None) -> list[str]:
    """The lines of one tool: name and title, hints, arguments, and what the policy does."""
    head = safe(info.name, 200) + (f" - {safe(info.title, 120)}" if info.title else "")
    words = _hint_words(info.annotations)
    lines = [head + (f" [{', '.join(words)}]" if words else "")]
    if info.arguments:
        for a in info.arguments:
            lines.append(f"    {safe(a.name, 100)}: {safe(a.type, 100)}{' (required)' if a.required else ''}")
    else:
        lines.append("    (no arguments)")
    if policy is not None:
        lines.append("    policy: " + policy_text(policy))
    return lines


def policy_text(p: dict[str, Any]) -> str:
    """``allow (tools.allow); path-confined: path; rate rules: r1`` and the like."""
    verdict: str = p["verdict"]
    code = p.get("reason_code")
    text = verdict + (f" {code}" if code and verdict == "deny" else "")
    if verdict == "allow with warning":
        text = "allow, unconstrained (no schema, E_TOOL_UNCONSTRAINED)"
    elif verdict != "deny" and not p.get("schema"):
        text += ", unconstrained (no schema)"
    if p.get("matched_rule"):
        text += f" ({p['matched_rule']})"
    if p.get("path_confined"):
        text += "; path-confined: " + ", ".join(p["path_confined"])
    if p.get("rate_rules"):
        text += "; rate rules: " + ", ".join(p["rate_rules"])
    if p.get("flow_rules"):
        text += "; flow rules: " + ", ".join(p["flow_rules"])
    return text


def json_line(server: str, info: ToolInfo, policy: dict[str, Any] | None) -> str:
    """One tool as one JSON object (the keys of docs/tools.md, "JSON lines"; always all present)."""
    obj = {
        "server": server,
        "name": info.name,
        "title": info.title,
        "description": info.description,
        "annotations": info.annotations,
        "arguments": [
            {"name": a.name, "type": a.type, "required": a.required, "description": a.description}
            for a in info.arguments
        ],
        "policy": policy,
    }
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
