"""A least-privilege policy from an observed session (docs/log.md, "assay mcp policy suggest").

Sans-IO: the calls and tool listings read from the logs in, the policy's text out, checked by
replaying every observed call against it with the same loader and pipeline wrap uses.

What the policy says:

- ``tools.allow``: every tool that was called and not denied (an ``allow``, an
  ``allow_with_warning``, or a ``would_deny`` that an observing wrap forwarded); every other
  tool is then denied. Tools that were denied by the policy in force, and tools a server listed
  but that were never called, are named in comments and stay denied.
- ``tools.approval_required``: the allowed tools a server annotated destructive
  (``destructiveHint: true``, or ``readOnlyHint: false`` with no ``destructiveHint``: the MCP
  default) in an ``assay.tool.listed`` record.
- ``path_confinement``: for each allowed tool, the arguments whose every recorded value
  (``--log-arguments``) was an absolute path, confined to the directories those paths used
  (not when a call's arguments were cut at ``--log-arguments-max``: the rest is unknown):
  a path's own directory, or the path itself when it is a directory another value lies in, or
  when its directory would be ``/``; directories inside ``home`` are written ``~/...``.
- ``enforcement.unconstrained_tools: warn``: no schemas are guessed.

:func:`suggest` replays the observed calls: a confinement that would deny one is dropped (a
comment says so), and a policy that still denies an observed call is never returned.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from assay.logs.entries import Entry
from assay.policy.paths import PathRefused, is_inside, normalize_path, path_from_argument
from assay.wrap.records.arguments import is_cut

__all__ = ["Observed", "Suggestion", "SuggestError", "suggest", "replay"]

MAX_PATHS: Final = 10_000  # distinct values kept per tool argument; past it the argument is not confined
MAX_TOOLS: Final = 10_000  # distinct tool names (called or listed): past it the logs are no one session
_OBSERVED: Final = frozenset({"allow", "allow_with_warning", "would_deny"})


class SuggestError(Exception):
    """No policy can be written: one line."""


@dataclass
class _Tool:
    calls: int = 0
    denied: int = 0
    servers: set[str] = field(default_factory=set)
    # argument -> its absolute paths (normal forms); None once a value was not one
    paths: dict[str, set[str] | None] = field(default_factory=dict)
    cut: bool = False  # some recorded arguments were cut (docs/wrap-records.md, "Logged arguments")


@dataclass
class Observed:
    """What the logs showed: the calls per tool, and the tools servers listed."""

    tools: dict[str, _Tool] = field(default_factory=dict)
    listed: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: int = 0
    with_arguments: int = 0

    def call(self, entry: Entry) -> None:
        if entry.tool not in self.tools and len(self.tools) >= MAX_TOOLS:
            raise SuggestError(f"the logs name more than {MAX_TOOLS:,} tools: give the logs of one client's session")
        tool = self.tools.setdefault(entry.tool, _Tool())
        if entry.outcome not in _OBSERVED:
            tool.denied += 1
            return
        self.calls += 1
        tool.calls += 1
        if entry.server:
            tool.servers.add(entry.server)
        if entry.has_arguments and isinstance(entry.arguments, dict):
            self.with_arguments += 1
            if is_cut(entry.arguments):  # cut at --log-arguments-max: the rest is unknown
                tool.cut = True
                return
            for name, value in entry.arguments.items():
                _note_path(tool, name, value)

    def listing(self, data: dict[str, Any]) -> None:
        name = data.get("tool")
        if isinstance(name, str) and (name in self.listed or len(self.listed) < MAX_TOOLS):
            self.listed[name] = data


def _note_path(tool: _Tool, name: str, value: Any) -> None:
    if name in tool.paths and tool.paths[name] is None:
        return
    values = value if isinstance(value, list) and value else [value]
    normal: list[str] = []
    for item in values:
        if not isinstance(item, str):
            tool.paths[name] = None
            return
        try:
            path = path_from_argument(item)
            if not path.startswith("/"):
                raise PathRefused("relative")
            normal.append(normalize_path(path))
        except PathRefused:
            tool.paths[name] = None
            return
    known = tool.paths.setdefault(name, set())
    assert known is not None
    known.update(normal)
    if len(known) > MAX_PATHS:
        tool.paths[name] = None


def _destructive(listed: dict[str, Any] | None) -> bool:
    notes = listed.get("annotations") if listed else None
    if not isinstance(notes, dict):
        return False
    hint = notes.get("destructiveHint")
    return hint is True or (hint is None and notes.get("readOnlyHint") is False)


def _ancestors(path: str) -> Iterable[str]:
    """The directories above ``path`` (a normal form), nearest first, ``/`` last."""
    while path != "/":
        path = posixpath.dirname(path)
        yield path


def directories(paths: Iterable[str]) -> list[str]:
    """The fewest directories that hold every path (module docstring), sorted. Linear in the
    number of paths times their depth."""
    values = set(paths)
    holders = {a for v in values for a in _ancestors(v) if a in values}  # paths another path lies in
    picked: set[str] = set()
    for v in values:
        parent = posixpath.dirname(v)
        picked.add(v if v in holders or parent == "/" or v == "/" else parent)
    return sorted(d for d in picked if not any(a in picked for a in _ancestors(d)))


def _root_of(path: str, roots: set[str]) -> str | None:
    if path in roots:
        return path
    return next((a for a in _ancestors(path) if a in roots), None)


@dataclass
class Suggestion:
    text: str
    replayed: int
    approvals: int
    dropped: list[str]


def _q(text: str) -> str:
    return msgspec.json.encode(text).decode()  # a YAML double-quoted scalar: JSON escapes are YAML's


def _shown(directory: str, home: str | None) -> str:
    if home and home != "/" and is_inside(directory, home.rstrip("/")):
        return "~" + directory[len(home.rstrip("/")):]
    return directory


def _render(observed: Observed, confined: dict[str, list[tuple[list[str], list[str]]]], dropped: list[str],
            header: list[str]) -> str:
    allowed = sorted(t for t, info in observed.tools.items() if info.calls)
    denied = sorted(t for t, info in observed.tools.items() if info.denied and not info.calls)
    unused = sorted(t for t in observed.listed if t not in observed.tools)
    approvals = [t for t in allowed if _destructive(observed.listed.get(t))]
    out = [f"# {line}" if line else "#" for line in header]
    out += ['version: "2.0"', 'name: "suggested"', "tools:", "  # the tools that were called; every other tool is denied"]
    out.append("  allow:" if allowed else "  allow: []")
    for t in allowed:
        info = observed.tools[t]
        where = f" via {', '.join(sorted(info.servers))}" if info.servers else ""
        out.append(f"    - {_q(t)}  # {info.calls} call{'s' if info.calls != 1 else ''}{where}")
    if approvals:
        out.append("  # annotated destructive by their server: a person approves each call (docs/policy.md, \"Approvals\")")
        out.append("  approval_required:")
        out += [f"    - {_q(t)}" for t in approvals]
    if denied:
        out.append("  # called, but denied by the policy in force (left denied):")
        out += [f"  #   {_q(t)}: {observed.tools[t].denied} denied" for t in denied]
    if unused:
        out.append("  # listed by a server but never called (denied):")
        out += [f"  #   {_q(t)}{' (destructive)' if _destructive(observed.listed[t]) else ''}" for t in unused]
    out += ["enforcement:", "  # no schemas were guessed: give each allowed tool one (docs/policy.md, \"Schemas\"),",
            "  # then make this deny", "  unconstrained_tools: warn"]
    rules = [(tools, args, within) for (args, within), tools in _grouped(confined).items()]
    if rules or dropped:
        out.append("# path arguments, confined to the directories the observed calls used")
        out.append("path_confinement:" if rules else "path_confinement: []")
    for tools, args, within in sorted(rules):
        out.append(f"  - tools: [{', '.join(_q(t) for t in tools)}]")
        out.append(f"    args: [{', '.join(_q(a) for a in args)}]")
        out.append(f"    within: [{', '.join(_q(d) for d in within)}]")
    for why in dropped:
        out.append(f"# not confined: {why}")
    return "\n".join(out) + "\n"


def _grouped(confined: dict[str, list[tuple[list[str], list[str]]]]) -> dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]]:
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for tool, rules in confined.items():
        for args, within in rules:
            groups.setdefault((tuple(args), tuple(within)), []).append(tool)
    return {key: sorted(tools) for key, tools in groups.items()}


def _confinements(observed: Observed, home: str | None, skip: set[str]) -> tuple[dict[str, list[tuple[list[str], list[str]]]], list[str]]:
    """tool -> its rules (arguments, directories). The directories are those of the session's
    paths taken together (:func:`directories`), so a listing of ``/ws`` and reads below it give
    ``/ws`` to both tools; each argument gets the ones its own values lie in."""
    used = [(tool, arg, values) for tool in sorted(observed.tools) if observed.tools[tool].calls
            for arg, values in sorted(observed.tools[tool].paths.items()) if values]
    roots = set(directories(v for _, _, values in used for v in values))
    confined: dict[str, list[tuple[list[str], list[str]]]] = {}
    notes: list[str] = []
    for tool, arg, values in used:
        if observed.tools[tool].cut:
            notes.append(f"{_q(tool)} argument {_q(arg)}: some of its calls' arguments were cut in the log")
            continue
        if tool in skip:
            notes.append(f"{_q(tool)} argument {_q(arg)}: a confinement would deny an observed call")
            continue
        held = {root for v in values if (root := _root_of(v, roots)) is not None}
        within = [_shown(d, home) for d in sorted(held)]
        rules = confined.setdefault(tool, [])
        for args, dirs in rules:
            if dirs == within:
                args.append(arg)
                break
        else:
            rules.append(([arg], within))
    return confined, notes


def replay(text: str, calls: Iterable[Entry], home: str | None) -> tuple[int, int, list[Entry]]:
    """Each observed call of ``calls`` judged by the policy ``text`` (the loader and pipeline
    wrap uses; no session state, so totals and rates do not bite): how many were judged, how
    many need approval, and the ones it denies."""
    from assay.policy.loader import load_policy
    from assay.policy.pipeline import Call, Pipeline

    policy = load_policy(text.encode(), source="suggested policy", home=home)
    pipeline = Pipeline(policy, None, ())
    judged = approvals = 0
    denied: list[Entry] = []
    for entry in calls:
        if entry.outcome not in _OBSERVED:
            continue
        judged += 1
        arguments = entry.arguments if entry.has_arguments else None
        decision = pipeline.decide(Call(entry.tool, arguments, entry.server or "default-mcp-server"))
        if decision.outcome == "deny":
            denied.append(entry)
        elif decision.approval_state is not None:
            approvals += 1
    return judged, approvals, denied


def suggest(observed: Observed, calls: Callable[[], Iterable[Entry]], *, home: str | None,
            header: list[str]) -> Suggestion:
    """The policy (module docstring). ``calls`` gives the observed calls again for the replay."""
    if not observed.calls:
        raise SuggestError("no allowed or observed call in the logs: nothing to allow")
    skip: set[str] = set()
    while True:
        confined, dropped = _confinements(observed, home, skip)
        text = _render(observed, confined, dropped, header)
        judged, approvals, denied = replay(text, calls(), home)
        confinement = {e.tool for e in denied} - skip
        if not denied:
            return Suggestion(text, judged, approvals, dropped)
        if not confinement or not confined.keys() & confinement:
            first = denied[0]
            raise SuggestError(f"the suggested policy would deny an observed call of {_q(first.tool)}; not written")
        skip |= confinement
