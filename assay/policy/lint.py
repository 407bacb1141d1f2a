"""What `assay mcp policy check` says about a policy that loaded (docs/policy-tools.md,
"assay mcp policy check"): the schemas that will not compile (their calls are denied with
``E_SCHEMA_COMPILE``) as warnings, and a one-line summary of what the file enforces.

Sans-IO: a loaded :class:`~assay.policy.model.Policy` and the loader's warnings in, lines out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assay.policy.plans import schema_errors

if TYPE_CHECKING:
    from assay.policy.model import Policy

__all__ = ["inspect_warnings", "schema_warnings", "summary", "users_lint"]


def schema_warnings(policy: Policy, source: str, warnings: list[str]) -> list[str]:
    """One line per tool whose schema fails to compile, unless a loader warning already names
    that schema (a remote ``$ref`` is warned about at load)."""
    out = []
    for tool, error in sorted(schema_errors(policy).items()):
        said = f"{source}: schemas.{tool}"
        if any(w.startswith(said + ".") or w.startswith(said + ":") for w in warnings):
            continue
        out.append(
            f"{source}: schemas.{tool}: does not compile, so every call of {tool} is denied "
            f"(E_SCHEMA_COMPILE): {' '.join(error.split())}"
        )
    return out


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def summary(policy: Policy) -> str:
    """``version 2.0, allowlist of 3 patterns, 1 deny pattern, 2 schemas, ...`` (what the file
    enforces, in the order of docs/policy.md, "Keys")."""
    t = policy.tools
    parts = [f"version {policy.version_label}"]
    if t.allow is not None or t.allow_classes is not None:
        bits = []
        if t.allow is not None:
            bits.append(_n(len(t.allow), "tool pattern"))
        if t.allow_classes is not None:
            bits.append(_n(len(t.allow_classes), "class", "classes"))
        parts.append(f"{' and '.join(bits)} allowed")
    else:
        parts.append("no allowlist (every tool not denied is allowed)")
    if t.deny:
        parts.append(_n(len(t.deny), "deny pattern"))
    if t.deny_classes:
        parts.append(_n(len(t.deny_classes), "denied class", "denied classes"))
    schemas = [k for k in policy.schemas if k != "$defs"]
    parts.append(_n(len(schemas), "schema"))
    parts.append(f"unconstrained tools: {policy.enforcement}")
    if policy.path_confinement:
        parts.append(_n(len(policy.path_confinement), "path rule"))
    limits = policy.limits
    if limits is not None and limits.tools:
        parts.append(_n(len(limits.tools), "rate rule"))
    if policy.sequences:
        parts.append(_n(len(policy.sequences), "flow rule"))
    approvals = len(t.approval_required or ()) + len(t.approval_required_classes or ())
    if approvals:
        parts.append(_n(approvals, "approval pattern"))
    if policy.tool_pins:
        parts.append(_n(len(policy.tool_pins), "pin"))
    inspect = policy.inspect
    if inspect is not None:
        d = inspect.default
        said = [
            f"{k} {v}"
            for k, v in (("secrets", d.secrets), ("injection", d.injection), ("descriptions", d.descriptions))
            if v not in (None, "off")
        ]
        said += [
            f"arguments.{k} {v}"
            for k, v in (("secrets", d.argument_secrets), ("tainted", d.argument_tainted))
            if v not in (None, "off")
        ]
        if inspect.entries:
            said.append(_n(len(inspect.entries), "tool entry", "tool entries"))
        parts.append("inspect: " + (" ".join(said) if said else "on"))
    if policy.resources is not None:
        parts.append("resources under the policy")
    if policy.prompts is not None:
        parts.append("prompts under the policy")
    if policy.users:
        parts.append(_n(len(policy.users), "users entry", "users entries"))
    return ", ".join(parts)


def inspect_warnings(policy: Policy, source: str) -> list[str]:
    """What ``inspect`` asks that can never happen: tainted arguments looked for while nothing is
    ever remembered (no tool has ``taint: true`` and no secret is looked for in any result)."""
    inspect = policy.inspect
    if inspect is None:
        return []
    from assay.policy.inspecting import _merge

    merged = [_merge(inspect.default, e) for e in (None, *inspect.entries)]
    if any(m.argument_tainted != "off" for m in merged) and not any(m.taint or m.secrets != "off" for m in merged):
        return [
            f"{source}: inspect.arguments.tainted: nothing is ever tainted (no tool has taint: true and no "
            "result is looked at for secrets), so no call is judged by it"
        ]
    return []


def users_lint(policy: Policy, source: str) -> list[str]:
    """A ``users`` entry's ``allow`` of one tool (a pattern naming one name) that a deny of the
    policy itself or of the same entry always denies (a deny always wins, docs/policy.md,
    "Policy by user (serve)"): that line allows nothing."""
    import json

    from assay.policy.patterns import exact_name, pattern_matches

    out = []
    own = policy.tools.deny or ()
    for i, entry in enumerate(policy.users):
        for pattern in entry.allow or ():
            name = exact_name(pattern)
            if name is None:
                continue
            for where, denies in (("tools.deny", own), (f"users[{i}].tools.deny", entry.deny or ())):
                hit = next((d for d in denies if pattern_matches(name, d)), None)
                if hit is not None:
                    out.append(
                        f"{source}: users[{i}].tools.allow {json.dumps(pattern, ensure_ascii=False)}: {where} "
                        f"{json.dumps(hit, ensure_ascii=False)} denies it (a deny always wins), so this allows nothing"
                    )
                    break
    return out
