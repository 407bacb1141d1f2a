"""The ``inspect``, ``resources`` and ``prompts`` sections of ``assay.yaml`` (docs/policy.md,
"Inspecting what comes back" and "Resources and prompts"): their frozen values, how the loader
reads them, and the per-tool settings a session asks for.

``inspect`` says what wrap looks for in what the server sends back (secrets, instructions aimed
at the model, poisoned tool descriptions) and in what the client sends out (secrets, tainted
values), per tool pattern and optional server. ``resources`` and ``prompts`` are allow and deny
lists over resource URIs and prompt names.

Plain values; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from assay.policy.patterns import NameMatcher, pattern_matches
from assay.policy.reader import Reader, Structure, join

__all__ = [
    "ARGUMENT_ACTIONS",
    "DESCRIPTION_ACTIONS",
    "DEFAULT_MAX_BYTES",
    "INJECTION_ACTIONS",
    "Inspect",
    "InspectEntry",
    "ListRules",
    "OVERSIZE_ACTIONS",
    "SECRET_ACTIONS",
    "Settings",
    "UserPattern",
    "check_patterns",
    "read_inspect",
    "read_list_rules",
]

SECRET_ACTIONS = ("mask", "block", "flag", "off")
INJECTION_ACTIONS = ("flag", "strip", "block", "off")
DESCRIPTION_ACTIONS = ("flag", "hide", "deny", "off")
ARGUMENT_ACTIONS = ("deny", "flag", "off")
OVERSIZE_ACTIONS = ("block", "pass")
DEFAULT_MAX_BYTES = 8 << 20  # the inspection ceiling: a server line this long is read whole
MAX_BYTES_CEILING = 64 << 20  # wrap holds a server line up to this size (docs/wrap.md)
_MIN_MAX_BYTES = 1024

_ACTION_KEYS = ("secrets", "injection", "descriptions", "arguments", "taint")
_ROOT_KEYS = _ACTION_KEYS + ("max_bytes", "oversize", "patterns", "tools")
_ENTRY_KEYS = ("tool", "server") + _ACTION_KEYS


@dataclass(frozen=True, slots=True)
class Settings:
    """What wrap does for one tool: each action, ``off`` when nothing is looked at."""

    secrets: str = "off"
    injection: str = "off"
    descriptions: str = "off"
    argument_secrets: str = "off"
    argument_tainted: str = "off"
    taint: bool = False

    @property
    def results(self) -> bool:
        """Whether the tool's results are read (a secret or injection check, or taint)."""
        return self.secrets != "off" or self.injection != "off" or self.taint

    @property
    def arguments(self) -> bool:
        return self.argument_secrets != "off" or self.argument_tainted != "off"


OFF = Settings()


@dataclass(frozen=True, slots=True)
class InspectEntry:
    """One ``inspect.tools`` entry: the tools (and optional server) it is for, and the
    settings it gives (``None``: the top level's)."""

    tools: tuple[str, ...]
    server: str | None = None
    secrets: str | None = None
    injection: str | None = None
    descriptions: str | None = None
    argument_secrets: str | None = None
    argument_tainted: str | None = None
    taint: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool": list(self.tools)}
        if self.server is not None:
            out["server"] = self.server
        out.update(_actions_dict(self))
        return out


@dataclass(frozen=True, slots=True)
class UserPattern:
    """One ``inspect.patterns`` entry: a secret rule of the policy's own."""

    kind: str
    regex: str


@dataclass(frozen=True, slots=True)
class Inspect:
    """``inspect``: the top level's settings (every tool), the per-tool entries (the first
    that matches a tool wins, its unset keys the top level's), the policy's own secret rules,
    the ceiling in bytes and what happens to a result over it."""

    default: InspectEntry
    entries: tuple[InspectEntry, ...] = ()
    patterns: tuple[UserPattern, ...] = ()
    max_bytes: int = DEFAULT_MAX_BYTES
    oversize: str = "block"

    def to_dict(self) -> dict[str, Any]:
        out = _actions_dict(self.default)
        out["max_bytes"] = self.max_bytes
        out["oversize"] = self.oversize
        out["patterns"] = [{"kind": p.kind, "regex": p.regex} for p in self.patterns]
        out["tools"] = [e.to_dict() for e in self.entries]
        return out

    def settings(self, server: str, tool: str) -> Settings:
        """The settings for ``tool`` in the wrap labelled ``server``."""
        base = self.default
        for entry in self.entries:
            if entry.server is not None and not pattern_matches(server, entry.server):
                continue
            if any(pattern_matches(tool, p) for p in entry.tools):
                return _merge(base, entry)
        return _merge(base, None)

    @property
    def any_results(self) -> bool:
        """Whether some tool's results may be read."""
        return any(_merge(self.default, e).results for e in (None, *self.entries))

    @property
    def any_descriptions(self) -> bool:
        return any(_merge(self.default, e).descriptions != "off" for e in (None, *self.entries))

    @property
    def any_taint(self) -> bool:
        """Whether value taint is used: some tool's results are tainted, or tainted arguments
        are looked for."""
        merged = [_merge(self.default, e) for e in (None, *self.entries)]
        return any(m.taint or m.argument_tainted != "off" for m in merged)


def _merge(base: InspectEntry, entry: InspectEntry | None) -> Settings:
    def pick(name: str, default: Any) -> Any:
        if entry is not None:
            value = getattr(entry, name)
            if value is not None:
                return value
        value = getattr(base, name)
        return default if value is None else value

    return Settings(
        pick("secrets", "off"),
        pick("injection", "off"),
        pick("descriptions", "off"),
        pick("argument_secrets", "off"),
        pick("argument_tainted", "off"),
        pick("taint", False),
    )


def _actions_dict(entry: InspectEntry) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("secrets", "injection", "descriptions"):
        value = getattr(entry, key)
        if value is not None:
            out[key] = value
    arguments = {}
    if entry.argument_secrets is not None:
        arguments["secrets"] = entry.argument_secrets
    if entry.argument_tainted is not None:
        arguments["tainted"] = entry.argument_tainted
    if arguments:
        out["arguments"] = arguments
    if entry.taint is not None:
        out["taint"] = entry.taint
    return out


@dataclass(frozen=True, slots=True)
class ListRules:
    """``resources`` or ``prompts``: ``allow`` (``None``: everything not denied) and ``deny``
    patterns (the tool-name pattern forms, over URIs or prompt names); a deny wins. A URI is
    matched by each of its readings (docs/policy.md, "Resources and prompts")."""

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"allow": None if self.allow is None else list(self.allow), "deny": list(self.deny)}

    def refusal(self, name: str) -> str | None:
        """Why ``name`` is refused (``deny`` or ``allow``: the list that refused it), or None."""
        refused = self.refusal_of((name,))
        return None if refused is None else refused[0]

    def refusal_of(self, readings: tuple[str, ...]) -> tuple[str, str] | None:
        """Why a name read several ways (a resource URI's readings: policy/urinames.py) is
        refused: the list that refused it and the reading it refused, or None. A deny of any
        reading wins; the allow list must match every reading."""
        if self.deny:
            denied = _matcher(self.deny)
            for name in readings:
                if denied(name):
                    return "deny", name
        if self.allow is not None:
            allowed = _matcher(self.allow)
            for name in readings:
                if not allowed(name):
                    return "allow", name
        return None


@lru_cache(maxsize=32)
def _matcher(patterns: tuple[str, ...]) -> NameMatcher:
    """A list's patterns compiled once (a policy holds a few lists; a reload makes new ones)."""
    return NameMatcher(patterns)


def _action(r: Reader, m: dict[str, Any], key: str, path: str, choices: tuple[str, ...]) -> str | None:
    if key not in m:
        return None
    value = m[key]
    if value is False:  # YAML's ``off`` is a boolean
        return "off"
    return r.enum(value, join(path, key), choices)


def _entry(r: Reader, m: dict[str, Any], path: str, tools: tuple[str, ...], server: str | None) -> InspectEntry:
    arg_secrets = arg_tainted = None
    am = r.mapping(m.get("arguments"), join(path, "arguments"), optional=True)
    if am is not None:
        r.fields(am, join(path, "arguments"), ("secrets", "tainted"))
        arg_secrets = _action(r, am, "secrets", join(path, "arguments"), ARGUMENT_ACTIONS)
        arg_tainted = _action(r, am, "tainted", join(path, "arguments"), ARGUMENT_ACTIONS)
    taint = r.boolean(m["taint"], join(path, "taint")) if "taint" in m else None
    return InspectEntry(
        tools,
        server,
        _action(r, m, "secrets", path, SECRET_ACTIONS),
        _action(r, m, "injection", path, INJECTION_ACTIONS),
        _action(r, m, "descriptions", path, DESCRIPTION_ACTIONS),
        arg_secrets,
        arg_tainted,
        taint,
    )


def _patterns(r: Reader, value: Any, path: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    got = r.strings(value, path, optional=False) or ()
    if not got or any(not p for p in got):
        raise Structure(path, "expected one or more non-empty patterns")
    return got


def _items(
    r: Reader, value: Any, path: str, known: tuple[str, ...], required: tuple[str, ...]
) -> list[tuple[str, dict[str, Any]]]:
    """The mappings of a list (absent: none), each with its path, its keys checked."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise Structure(path, f"expected a list of mappings with {', '.join(required)}")
    out = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        mapping = r.mapping(item, where)
        r.fields(mapping, where, known)
        for key in required:
            if key not in mapping:
                raise Structure(where, f"missing field {key}")
        out.append((where, mapping))
    return out


def read_inspect(r: Reader, value: Any) -> Inspect | None:
    """``inspect`` (absent: ``None``). Raises :class:`Structure` or ValueError (a bad value;
    the loader reports it as a validation error)."""
    m = r.mapping(value, "inspect", optional=True)
    if m is None:
        return None
    r.fields(m, "inspect", _ROOT_KEYS)
    default = _entry(r, m, "inspect", ("*",), None)
    max_bytes = r.u64(m.get("max_bytes"), "inspect.max_bytes")
    if max_bytes is None:
        max_bytes = DEFAULT_MAX_BYTES
    elif not _MIN_MAX_BYTES <= max_bytes <= MAX_BYTES_CEILING:
        raise ValueError(f"inspect.max_bytes must be between {_MIN_MAX_BYTES} and {MAX_BYTES_CEILING} bytes")
    oversize = r.enum(m.get("oversize", "block"), "inspect.oversize", OVERSIZE_ACTIONS)
    patterns = [
        UserPattern(r.string(pm["kind"], f"{where}.kind"), r.string(pm["regex"], f"{where}.regex"))
        for where, pm in _items(r, m.get("patterns"), "inspect.patterns", ("kind", "regex"), ("kind", "regex"))
    ]
    entries: list[InspectEntry] = []
    for where, em in _items(r, m.get("tools"), "inspect.tools", _ENTRY_KEYS, ("tool",)):
        server = r.string(em["server"], f"{where}.server") if "server" in em else None
        if server == "":
            raise ValueError(f"{where}.server: a server label or pattern must not be empty")
        entries.append(_entry(r, em, where, _patterns(r, em["tool"], f"{where}.tool"), server))
    return Inspect(default, tuple(entries), tuple(patterns), max_bytes, oversize)


def check_patterns(patterns: tuple[UserPattern, ...]) -> None:
    """ValueError (one line) for a rule wrap could not use: a bad kind, a kind of the built-in
    rule set, a regex the linear-time dialect refuses or one that matches the empty string
    (docs/inspect.md, "Your own rules"). The same check the session's rules make."""
    from assay.inspect.userrules import UserRule, UserRules

    try:
        UserRules([UserRule(p.kind, p.regex) for p in patterns])
    except ValueError as exc:
        raise ValueError(f"inspect.patterns: {exc}") from None


def read_list_rules(r: Reader, value: Any, path: str) -> ListRules | None:
    """``resources`` or ``prompts`` (absent: ``None``)."""
    m = r.mapping(value, path, optional=True)
    if m is None:
        return None
    r.fields(m, path, ("allow", "deny"))
    allow = r.strings(m.get("allow"), f"{path}.allow")
    deny = r.strings(m.get("deny"), f"{path}.deny") or ()
    for p in (allow or ()) + deny:
        if not p:
            raise ValueError(f"{path}: a pattern must not be empty")
    return ListRules(allow, deny)
