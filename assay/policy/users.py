"""Policy by user (docs/policy.md, "Policy by user (serve)"): the ``users`` section and
:func:`for_user`, the plain policy that applies to one user's claims.

``users`` is a list of entries, each ``{name?, when: {claims: {<claim>: [values]}}, tools: {...}}``.
An entry *applies* to a user when every condition of its ``when.claims`` holds:

- a condition lists the accepted values (strings);
- a claim that is a string holds when it equals one of them: the whole string, code point by
  code point (no substrings, no case folding, no Unicode normalization, no splitting on spaces);
- a claim that is a list holds when any of its elements is a string that equals one of them;
- a missing claim never holds, nor does any other JSON value (a number, ``true``, an object, null);
- a claim name is a top-level claim; a dot in it is part of the name (no nested lookup).

Every applying entry's ``tools`` lists are appended to the policy's own, in file order, and the
result is decided as any policy is (docs/policy.md, "Evaluation and reason codes"), so a deny
always wins: an entry cannot allow what ``tools.deny`` (the policy's or another applying entry's)
denies. An entry's ``allow``/``allow_classes`` widen an allowlist; when the policy has none
(every tool not denied is allowed) they have nothing to widen and are ignored (the loader warns).

Without claims (wrap, any stdio user) no entry applies: :func:`for_user` returns the policy
itself. Sans-IO: values in, values out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from assay.policy.errors import PolicyError
from assay.policy.model import UserEntry
from assay.policy.reader import Reader, Structure, join, type_name

if TYPE_CHECKING:
    from assay.policy.model import Policy, ToolRules

__all__ = [
    "USER_TOOLS_KEYS",
    "read_users",
    "users_warnings",
    "applies",
    "claim_holds",
    "applying",
    "for_user",
    "Origin",
    "origins",
]

#: the ``tools`` keys an entry may hold: what a user may call, and what needs a person's approval
USER_TOOLS_KEYS = ("allow", "deny", "allow_classes", "deny_classes", "approval_required", "approval_required_classes")
_ENTRY_KEYS = ("name", "when", "tools")
_CACHE_MAX = 256  # specialized policies kept per policy, by the set of entries that apply


def read_users(r: Reader, value: Any) -> tuple[UserEntry, ...]:
    """``users``: a list of entries (a type mismatch is :class:`Structure` naming its path; an
    entry that can never apply or says nothing is a ``validation`` error)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Structure("users", f"expected a list of entries, got {type_name(value)}")
    out = []
    for i, item in enumerate(value):
        p = f"users[{i}]"
        m = r.mapping(item, p)
        r.fields(m, p, _ENTRY_KEYS)
        for req in ("when", "tools"):
            if req not in m:
                raise Structure(p, f"missing field {req}")
        name = r.string(m.get("name"), f"{p}.name", optional=True)
        when = r.mapping(m["when"], f"{p}.when")
        r.fields(when, f"{p}.when", ("claims",))
        if "claims" not in when:
            raise Structure(f"{p}.when", "missing field claims")
        cp = f"{p}.when.claims"
        cm = r.mapping(when["claims"], cp)
        if not cm:
            raise PolicyError("validation", f"{cp} must name at least one claim (an entry for everyone is tools:)")
        claims: dict[str, tuple[str, ...]] = {}
        for claim, accepted in cm.items():
            if isinstance(accepted, str):  # a lone value reads as a list of one; say so rather than guess
                raise Structure(
                    join(cp, claim),
                    f"expected a list of accepted values, got a string (write [{json.dumps(accepted)}])",
                )
            values = r.strings(accepted, join(cp, claim), optional=False) or ()
            if not values:
                raise PolicyError("validation", f"{join(cp, claim)} must list at least one accepted value")
            claims[claim] = values
        tp = f"{p}.tools"
        tm = r.mapping(m["tools"], tp)
        r.fields(tm, tp, USER_TOOLS_KEYS)
        lists = {key: r.strings(tm.get(key), f"{tp}.{key}") for key in USER_TOOLS_KEYS}
        out.append(UserEntry(name=name, claims=claims, **lists))
    return tuple(out)


def users_warnings(entries: tuple[UserEntry, ...], tools: ToolRules) -> list[str]:
    """What an entry says that can never take effect: an ``allow`` when the policy has no
    allowlist (every tool not denied is already allowed to everyone)."""
    if tools.allow is not None or tools.allow_classes is not None:
        return []
    out = []
    for i, entry in enumerate(entries):
        for key in ("allow", "allow_classes"):
            if getattr(entry, key) is not None:
                out.append(
                    f"users[{i}].tools.{key} has no effect: the policy has no allowlist (tools.allow or "
                    "tools.allow_classes), so every tool not denied is already allowed to everyone; "
                    "write tools.allow (it may be []) to allow tools to some users only"
                )
    return out


def claim_holds(claim: Any, accepted: tuple[str, ...]) -> bool:
    """Whether one claim's value meets one condition (the module docstring)."""
    if isinstance(claim, str):
        return claim in accepted  # tuple membership: equality only
    if isinstance(claim, (list, tuple)):
        return any(isinstance(v, str) and v in accepted for v in claim)
    return False


def applies(entry: UserEntry, claims: Mapping[str, Any]) -> bool:
    """Whether every condition of ``entry.when.claims`` holds for ``claims`` (the module docstring)."""
    for name, accepted in entry.claims.items():
        if name not in claims or not claim_holds(claims[name], accepted):
            return False
    return True


def applying(policy: Policy, claims: Mapping[str, Any] | None) -> tuple[int, ...]:
    """The indexes of the ``users`` entries that apply to ``claims``, in file order (none
    without claims)."""
    if not claims or not policy.users:
        return ()
    return tuple(i for i, entry in enumerate(policy.users) if applies(entry, claims))


def _specialized(policy: Policy, which: tuple[int, ...]) -> Policy:
    t = policy.tools
    changes: dict[str, Any] = {}
    widen = policy.has_allowlist  # without an allowlist, an entry's allow has nothing to widen
    for key in USER_TOOLS_KEYS:
        if key in ("allow", "allow_classes") and not widen:
            continue
        lists = [got for i in which if (got := getattr(policy.users[i], key)) is not None]
        if lists:  # an entry's empty list still makes the key present (``approval_required: []``)
            changes[key] = (getattr(t, key) or ()) + tuple(p for items in lists for p in items)
    # the file's digest and warnings stay: records name the file that decided (every user's
    # calls carry the same policy_digest); the compiled form is the specialized policy's own
    return replace(policy, tools=replace(t, **changes), users=(), digest=policy.digest, _engine=None, _users=None)


def for_user(policy: Policy, claims: Mapping[str, Any] | None) -> Policy:
    """The plain policy that applies to a user with these claims: the policy with the ``tools``
    lists of every applying ``users`` entry appended to its own, in file order, and no ``users``
    section. ``claims`` is the user's token claims (an API key's configured claims); ``None`` or
    ``{}`` (wrap, a stdio user) applies no entry and returns ``policy`` itself, as does a user no
    entry applies to. The result keeps ``policy``'s digest; users to whom the same entries apply
    get the same object (its compiled plans shared)."""
    which = applying(policy, claims)
    if not which:
        return policy
    cache: dict[tuple[int, ...], Policy] | None = policy._users
    if cache is None:
        cache = {}
        object.__setattr__(policy, "_users", cache)
    got = cache.get(which)
    if got is None:
        got = _specialized(policy, which)
        if len(cache) < _CACHE_MAX:
            cache[which] = got
    return got


@dataclass(frozen=True)
class Origin:
    """Where a pattern of a specialized policy's ``tools`` list comes from: the policy's own
    list (``entry`` None) or ``users[entry]``."""

    entry: int | None
    name: str | None = None

    def text(self, key: str) -> str:
        if self.entry is None:
            return f"tools.{key}"
        named = f" ({json.dumps(self.name, ensure_ascii=False)})" if self.name else ""
        return f"users[{self.entry}]{named}.tools.{key}"


def origins(policy: Policy, which: tuple[int, ...], key: str) -> dict[str, Origin]:
    """Each pattern of ``tools.<key>`` of the policy specialized for the entries ``which`` ->
    where it comes from (the policy's own list first, then the first entry that adds it)."""
    out: dict[str, Origin] = {}
    for p in getattr(policy.tools, key) or ():
        out.setdefault(p, Origin(None))
    for i in which:
        entry = policy.users[i]
        for p in getattr(entry, key) or ():
            out.setdefault(p, Origin(i, entry.name))
    return out
