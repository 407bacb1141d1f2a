"""A least-privilege policy from an observed session (docs/log.md, "assay mcp policy suggest").

Sans-IO: the calls, tool listings and client records read from the logs in, the policy's text
out (:mod:`assay.logs.suggest_text` writes it), checked by replaying every observed call
against it with the same loader and pipeline wrap uses.

What the policy says:

- ``tools.allow``: every tool that was called and not denied (an ``allow``, an
  ``allow_with_warning``, or a ``would_deny`` that an observing wrap forwarded), each by its
  exact name (:func:`~assay.policy.patterns.exact_pattern`: a name that holds a ``*`` or starts
  with ``=`` is written ``=name``, so it allows that one tool and no other); every other tool is
  then denied. Tools that were denied by the policy in force, and tools a server listed but that
  were never called, are named in comments and stay denied.
- ``tools.approval_required``: the allowed tools a server annotated destructive
  (``destructiveHint: true``, or ``readOnlyHint: false`` with no ``destructiveHint``: the MCP
  default) in an ``assay.tool.listed`` record, unless a client that called the tool cannot
  answer an approval (its ``assay.client.capabilities`` records say it declared no form-mode
  elicitation): an everyday tool of that client is not put behind an approval it can never
  give; a comment names it. ``tools.approval_fallback: deny`` is written with them.
- ``path_confinement``: for each allowed tool, the arguments whose every recorded value
  (``--log-arguments``) was an absolute path, confined to the directories those paths used
  (not when a call's arguments were cut at ``--log-arguments-max``: the rest is unknown):
  a path's own directory, or the path itself when it is a directory another value lies in, or
  when its directory would be ``/``; directories inside ``home`` are written ``~/...``. A
  comment names each allowed tool left unconfined, and why.
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
from assay.logs.suggest_text import Plan, Unwritable, printable, quoted, render
from assay.policy.paths import PathRefused, is_inside, normalize_path, path_from_argument
from assay.session.records.arguments import is_cut

__all__ = ["Observed", "Suggestion", "SuggestError", "client_record", "directories", "suggest", "replay"]

MAX_PATHS: Final = 10_000  # distinct values kept per tool argument; past it the argument is not confined
MAX_TOOLS: Final = 10_000  # distinct tool names (called or listed): past it the logs are no one session
MAX_CLIENTS: Final = 10_000  # distinct (session, server) pairs whose client records are kept
MAX_CALLERS: Final = 4_096  # distinct (session, server) pairs kept per tool; past it its clients are unknown
MAX_KEY: Final = 1_024  # characters of a session key and server label kept as a pair
_OBSERVED: Final = frozenset({"allow", "allow_with_warning", "would_deny"})
_CLIENT_TYPE: Final = b'"assay.client.capabilities"'
_decoder = msgspec.json.Decoder()

Key = tuple[str | None, str | None]  # (session, server): the wrap a call or a client record belongs to


class SuggestError(Exception):
    """No policy can be written: one line."""


@dataclass
class _Tool:
    calls: int = 0
    denied: int = 0
    recorded: int = 0  # calls with recorded arguments (wrap --log-arguments)
    servers: set[str] = field(default_factory=set)
    callers: set[Key] = field(default_factory=set)  # the wraps its observed calls went through
    callers_cut: bool = False  # more callers than MAX_CALLERS, or one with an overlong key
    # argument -> its absolute paths (normal forms); None once a value was not one
    paths: dict[str, set[str] | None] = field(default_factory=dict)
    cut: bool = False  # some recorded arguments were cut (docs/wrap-records.md, "Logged arguments")


@dataclass
class Observed:
    """What the logs showed: the calls per tool, the tools servers listed, and what each wrap's
    client declared (elicitation: ``form``, ``url``, ``none``)."""

    tools: dict[str, _Tool] = field(default_factory=dict)
    listed: dict[str, dict[str, Any]] = field(default_factory=dict)
    clients: dict[Key, set[str]] = field(default_factory=dict)
    client_names: dict[Key, set[str]] = field(default_factory=dict)
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
        key = (entry.session, entry.server)
        if key not in tool.callers:
            if len(tool.callers) >= MAX_CALLERS or sum(len(k or "") for k in key) > MAX_KEY:
                tool.callers_cut = True
            else:
                tool.callers.add(key)
        if entry.has_arguments and isinstance(entry.arguments, dict):
            self.with_arguments += 1
            tool.recorded += 1
            if is_cut(entry.arguments):  # cut at --log-arguments-max: the rest is unknown
                tool.cut = True
                return
            for name, value in entry.arguments.items():
                _note_path(tool, name, value)

    def listing(self, data: dict[str, Any]) -> None:
        name = data.get("tool")
        if isinstance(name, str) and (name in self.listed or len(self.listed) < MAX_TOOLS):
            self.listed[name] = data

    def client(self, data: dict[str, Any]) -> None:
        """An ``assay.client.capabilities`` record's ``data`` (:func:`client_record`)."""
        session, server, mode = data.get("session"), data.get("server"), data.get("elicitation")
        if (
            not (session is None or isinstance(session, str))
            or not isinstance(server, str)
            or not isinstance(mode, str)
        ):
            return
        key = (session, server)
        if key not in self.clients and (len(self.clients) >= MAX_CLIENTS or len(session or "") + len(server) > MAX_KEY):
            return
        self.clients.setdefault(key, set()).add(mode if mode in ("form", "url") else "none")
        client = data.get("client")
        name = client.get("name") if isinstance(client, dict) else None
        names = self.client_names.setdefault(key, set())
        if isinstance(name, str) and len(names) < 4:
            names.add(name[:64])

    def askable(self, name: str) -> str:
        """Whether every client that called ``name`` could answer an approval: ``yes``; ``no``
        when one of them declared no form-mode elicitation in every record of its wrap;
        ``unknown`` when some caller has no record (logs of an older assay, no decision log)."""
        tool = self.tools[name]
        modes = [self.clients.get(k) for k in tool.callers]
        if any(m is not None and "form" not in m for m in modes):
            return "no"
        if tool.callers_cut or not modes or any(m is None for m in modes):
            return "unknown"
        return "yes"

    def unaskable_clients(self, name: str) -> list[str]:
        """The names of the clients that called ``name`` and cannot answer an approval."""
        found: set[str] = set()
        for key in self.tools[name].callers:
            modes = self.clients.get(key)
            if modes is not None and "form" not in modes:
                found |= self.client_names.get(key, set())
        return sorted(found)[:4]


def client_record(line: bytes) -> dict[str, Any] | None:
    """The ``data`` of an ``assay.client.capabilities`` record (docs/wrap-records.md, "The
    client"), when ``line`` is one, else None."""
    if _CLIENT_TYPE not in line:
        return None
    try:
        doc = _decoder.decode(line)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("type") != "assay.client.capabilities":
        return None
    data = doc.get("data")
    return data if isinstance(data, dict) else None


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


def destructive(listed: dict[str, Any] | None) -> bool:
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
    approvals: int  # observed calls that need approval under it
    plan: Plan


def _shown(directory: str, home: str | None) -> str:
    if home and home != "/" and is_inside(directory, home.rstrip("/")):
        return "~" + directory[len(home.rstrip("/")) :]
    return directory


def _writable(name: str) -> bool:
    try:
        quoted(name)
    except Unwritable:
        return False
    return True


def _confinements(
    observed: Observed, allowed: list[str], home: str | None, skip: set[str]
) -> tuple[dict[str, list[tuple[list[str], list[str]]]], list[tuple[str, str]]]:
    """tool -> its rules (arguments, directories), and each allowed tool left unconfined with
    why. The directories are those of the session's paths taken together (:func:`directories`),
    so a listing of ``/ws`` and reads below it give ``/ws`` to both tools; each argument gets
    the ones its own values lie in."""
    used = [
        (tool, arg, values) for tool in allowed for arg, values in sorted(observed.tools[tool].paths.items()) if values
    ]
    roots = set(directories(v for _, _, values in used for v in values))
    confined: dict[str, list[tuple[list[str], list[str]]]] = {}
    why: dict[str, str] = {}
    for tool, arg, values in used:
        info = observed.tools[tool]
        if info.cut:
            why[tool] = "some of its calls' arguments were cut in the log (wrap --log-arguments-max)"
            continue
        if tool in skip:
            why[tool] = "a confinement of its paths would deny an observed call"
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
    unconfined: list[tuple[str, str]] = []
    for tool in allowed:
        if tool in confined:
            continue
        info = observed.tools[tool]
        if tool in why:
            unconfined.append((tool, why[tool]))
        elif not info.recorded:
            unconfined.append((tool, "no call had recorded arguments (wrap ran without --log-arguments)"))
        else:
            unconfined.append((tool, "no argument held only absolute paths in every recorded call"))
    return confined, unconfined


def _grouped(confined: dict[str, list[tuple[list[str], list[str]]]]) -> list[tuple[list[str], list[str], list[str]]]:
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for tool, rules in confined.items():
        for args, within in rules:
            groups.setdefault((tuple(args), tuple(within)), []).append(tool)
    return sorted((sorted(tools), list(args), list(within)) for (args, within), tools in groups.items())


def _plan(observed: Observed, home: str | None, header: list[str], skip: set[str], unwritable: set[str]) -> Plan:
    names = sorted(observed.tools)
    allowed = [t for t in names if observed.tools[t].calls and t not in unwritable]
    destructive_tools = [t for t in allowed if destructive(observed.listed.get(t))]
    confined, unconfined = _confinements(observed, allowed, home, skip)
    unused = sorted(t for t in observed.listed if t not in observed.tools and _writable(t))
    return Plan(
        header=header,
        allowed=[(t, observed.tools[t].calls, sorted(observed.tools[t].servers)) for t in allowed],
        approvals=[t for t in destructive_tools if observed.askable(t) != "no"],
        unaskable=[(t, observed.unaskable_clients(t)) for t in destructive_tools if observed.askable(t) == "no"],
        ask_unknown=[t for t in destructive_tools if observed.askable(t) == "unknown"],
        denied=[
            (t, observed.tools[t].denied)
            for t in names
            if observed.tools[t].denied and not observed.tools[t].calls and t not in unwritable
        ],
        unused=[(t, destructive(observed.listed[t])) for t in unused],
        unwritable=len(unwritable),
        rules=_grouped(confined),
        unconfined=unconfined,
    )


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


def suggest(
    observed: Observed,
    calls: Callable[[], Iterable[Entry]],
    *,
    home: str | None,
    header: list[str],
    ceiling: int | None = None,
) -> Suggestion:
    """The policy (module docstring). ``calls`` gives the observed calls again for the replay;
    ``ceiling`` is the policy byte ceiling wrap will read it under (``ASSAY_MCP_MAX_POLICY_BYTES``)."""
    from assay.policy.errors import PolicyError
    from assay.policy.files import policy_ceiling

    if not observed.calls:
        raise SuggestError("no allowed or observed call in the logs: nothing to allow")
    limit = policy_ceiling(ceiling)
    unwritable = {t for t in observed.tools if not _writable(t)}  # no YAML form: left out, so denied
    skip: set[str] = set()
    while True:
        plan = _plan(observed, home, header, skip, unwritable)
        if not plan.allowed:
            raise SuggestError("no observed tool has a name a policy file can hold: nothing to allow")
        text = render(plan)
        if not printable(text):  # never expected: every value is escaped; checked all the same
            raise SuggestError("the suggested policy would hold a character outside printable ASCII; not written")
        size = len(text)
        if size > limit:
            raise SuggestError(
                f"the suggested policy would be {size:,} bytes, more than the policy ceiling of "
                f"{limit:,} (ASSAY_MCP_MAX_POLICY_BYTES); not written"
            )
        try:
            judged, approvals, denied = replay(text, (e for e in calls() if e.tool not in unwritable), home)
        except PolicyError as exc:  # never expected: the text is ours; said in one line all the same
            raise SuggestError(f"the suggested policy does not load ({exc.detail}); not written") from None
        confinement = {e.tool for e in denied} - skip
        if not denied:
            return Suggestion(text, judged, approvals, plan)
        ruled = {t for tools, _, _ in plan.rules for t in tools}
        if not confinement or not ruled & confinement:
            first = denied[0]
            raise SuggestError(
                f"the suggested policy would deny an observed call of {quoted(first.tool, lossy=True)}; not written"
            )
        skip |= confinement
