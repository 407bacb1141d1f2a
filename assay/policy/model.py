"""The types of a loaded MCP policy (docs/policy.md): frozen values and nothing else.

Reading YAML into these values is :mod:`assay.policy.loader`; deciding calls with them is
:mod:`assay.policy.engine`. This module imports neither, so both can import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assay.canonical import jcs_digest

__all__ = [
    "Policy",
    "ToolRules",
    "ToolPin",
    "Limits",
    "RateRule",
    "PathRule",
    "FlowRule",
    "UserEntry",
    "UNCONSTRAINED_MODES",
    "APPROVAL_FALLBACKS",
]

UNCONSTRAINED_MODES = ("warn", "deny", "allow")

_LIST_KEYS = (
    "allow",
    "deny",
    "allow_classes",
    "deny_classes",
    "approval_required",
    "approval_required_classes",
    "restrict_scope",
    "restrict_scope_classes",
    "redact_args",
    "redact_args_classes",
)
_SCOPE_FIELDS = ("scope_type", "scope_value", "scope_match_mode")
_REDACT_FIELDS = ("redaction_target", "redaction_mode", "redaction_scope")
_TOOLS_KEYS = (
    "allow",
    "deny",
    "allow_classes",
    "deny_classes",
    "approval_required",
    "approval_required_classes",
    "restrict_scope",
    "restrict_scope_classes",
    "restrict_scope_contract",
    "redact_args",
    "redact_args_classes",
    "redact_args_contract",
)
# keys of ``tools`` that appear in the normalized model only when set (the digest of a policy
# without them is what it was before they existed)
_APPROVAL_KEYS = ("approval_fallback", "approval_timeout")
APPROVAL_FALLBACKS = ("deny", "allow")
_ROOT_KEYS = (
    "version",
    "name",
    "tools",
    "allow",
    "deny",
    "schemas",
    "constraints",
    "enforcement",
    "limits",
    "signatures",
    "tool_pins",
    "tool_classes",
    "discovery",
    "runtime_monitor",
    "kill_switch",
    "path_confinement",
    "sequences",
    "aliases",
    "inspect",
    "resources",
    "prompts",
    "users",
)
_PIN_FIELDS = ("server_id", "tool_name", "schema_hash", "meta_hash")


@dataclass(frozen=True, slots=True)
class ToolPin:
    """One ``tool_pins`` entry; all four fields are required."""

    server_id: str
    tool_name: str
    schema_hash: str
    meta_hash: str

    def fingerprint(self) -> str:
        """``server_id:tool_name:<first 8 hex of schema_hash>`` as the drift reason shows it."""
        return f"{self.server_id}:{self.tool_name}:{self.schema_hash[:8]}"

    def to_dict(self) -> dict[str, str]:
        return {
            "server_id": self.server_id,
            "tool_name": self.tool_name,
            "schema_hash": self.schema_hash,
            "meta_hash": self.meta_hash,
        }


@dataclass(frozen=True, slots=True)
class RateRule:
    """One ``limits.tools`` entry (docs/policy.md, "Per-tool rate limits"): the tools matching
    ``tools`` share at most ``max_calls`` calls in any window of ``per`` seconds, or in the whole
    session when ``per`` is ``None``. ``id`` is the rule's name in denies (``limits.tools[i]``
    unless the file gives one)."""

    id: str
    tools: tuple[str, ...]
    max_calls: int
    per: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "tools": list(self.tools), "max_calls": self.max_calls, "per": self.per}


@dataclass(frozen=True, slots=True)
class Limits:
    """``limits``: session lifetime totals (``None`` = no limit) and the per-tool rate rules."""

    max_requests_total: int | None = None
    max_tool_calls_total: int | None = None
    tools: tuple[RateRule, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolRules:
    """``tools:``. Lists are tuples; ``None`` means absent (which differs from empty)."""

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] | None = None
    allow_classes: tuple[str, ...] | None = None
    deny_classes: tuple[str, ...] | None = None
    approval_required: tuple[str, ...] | None = None
    approval_required_classes: tuple[str, ...] | None = None
    restrict_scope: tuple[str, ...] | None = None
    restrict_scope_classes: tuple[str, ...] | None = None
    restrict_scope_contract: dict[str, str] | None = None
    redact_args: tuple[str, ...] | None = None
    redact_args_classes: tuple[str, ...] | None = None
    redact_args_contract: dict[str, str] | None = None
    approval_fallback: str | None = None  # deny | allow; None = absent (deny)
    approval_timeout: float | None = None  # seconds; None = absent (120)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in _TOOLS_KEYS:
            value = getattr(self, key)
            if isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, dict):
                value = dict(value)
            out[key] = value
        for key in _APPROVAL_KEYS:  # only when present, so older policies keep their digest
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True, slots=True)
class PathRule:
    """One ``path_confinement`` entry: the named arguments of the matching tools must name paths
    inside one of ``within`` (normalized absolute directories). ``base`` resolves relative paths
    (absent: they are denied); ``resolve_symlinks`` also resolves symlinks on this machine."""

    tools: tuple[str, ...]
    args: tuple[str, ...]
    within: tuple[str, ...]
    base: str | None = None
    resolve_symlinks: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "tools": list(self.tools),
            "args": list(self.args),
            "within": list(self.within),
            "base": self.base,
            "resolve_symlinks": self.resolve_symlinks,
        }


def _selector_dict(sel: Any) -> str | dict[str, Any]:
    """A selector (or an alias member) as the file writes it; ``server`` only when set, so the
    digest of a policy without it is unchanged."""
    if isinstance(sel, str):
        return sel
    response = getattr(sel, "response", None)
    if sel.args_match is None and sel.server is None and response is None:
        tool: str = sel.tool
        return tool
    out: dict[str, Any] = {"tool": sel.tool}
    if sel.server is not None:
        out["server"] = sel.server
    if sel.args_match is not None:
        out["args_match"] = dict(sel.args_match)
    if response is not None:  # only when set: the digest of a selector without it is unchanged
        out["response"] = response
    return out


@dataclass(frozen=True, slots=True)
class FlowRule:
    """One ``sequences`` entry (docs/policy.md, "Flow rules"): a rule of the sequence dialect
    (an :class:`assay.policy.sequence.Rule`; this module imports no other policy module), its
    ``id`` (given, or the dialect's ``rule_id``) and the ``message`` a deny shows (``None``: the
    evaluator's reason)."""

    rule: Any
    id: str
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        r = self.rule
        out: dict[str, Any] = {"id": self.id, "type": r.kind}
        for role in ("tool", "first", "trigger", "then", "forbidden"):
            sel = getattr(r, role)
            if sel is not None:
                out[role] = _selector_dict(sel)
        if r.kind == "sequence":
            out["tools"] = [_selector_dict(s) for s in r.tools]
            out["strict"] = r.strict
        if r.within is not None:
            out["within"] = r.within
        if r.max is not None:
            out["max"] = r.max
        if r.pattern is not None:
            out["pattern"] = r.pattern
        if r.window is not None:  # only when set: the digest of a rule without ``for`` is unchanged
            out["for"] = r.window
        out["message"] = self.message
        return out


@dataclass(frozen=True, slots=True)
class UserEntry:
    """One ``users`` entry (docs/policy.md, "Policy by user (serve)"): the ``tools`` lists that
    apply to a user whose claims meet every condition of ``claims`` (claim name -> accepted
    values; :mod:`assay.policy.users` decides and applies). ``None`` means the key is absent."""

    name: str | None
    claims: dict[str, tuple[str, ...]]
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] | None = None
    allow_classes: tuple[str, ...] | None = None
    deny_classes: tuple[str, ...] | None = None
    approval_required: tuple[str, ...] | None = None
    approval_required_classes: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        tools = {}
        for key in (
            "allow",
            "deny",
            "allow_classes",
            "deny_classes",
            "approval_required",
            "approval_required_classes",
        ):
            value = getattr(self, key)
            if value is not None:
                tools[key] = list(value)
        return {
            "name": self.name,
            "when": {"claims": {k: list(v) for k, v in self.claims.items()}},
            "tools": tools,
        }


@dataclass(frozen=True, eq=False)
class Policy:
    """A loaded, normalized MCP policy. Treat every container as read-only.

    ``digest`` is ``policy_digest``, ``version_label`` is ``policy_version`` as decisions
    report it (``"unspecified"`` when blank). ``warnings`` holds the load warnings (unknown keys,
    deprecations) in the order they were found.
    """

    version: str = ""
    name: str = ""
    tools: ToolRules = field(default_factory=ToolRules)
    schemas: dict[str, Any] = field(default_factory=dict)
    enforcement: str = "warn"
    limits: Limits | None = None
    signatures: dict[str, bool] | None = None
    tool_pins: dict[str, ToolPin] = field(default_factory=dict)
    tool_classes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    discovery: dict[str, Any] | None = None
    runtime_monitor: dict[str, Any] | None = None
    kill_switch: dict[str, Any] | None = None
    path_confinement: tuple[PathRule, ...] = ()
    sequences: tuple[FlowRule, ...] = ()
    # an alias -> its members: names or patterns, or selectors with a server (docs/policy.md, "Flow rules")
    aliases: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    # docs/policy.md, "Inspecting what comes back" and "Resources and prompts" (the values of
    # assay.policy.inspecting; this module imports no other policy module): None when absent
    inspect: Any = None
    resources: Any = None
    prompts: Any = None
    # docs/policy.md, "Policy by user (serve)": what applies to some users only, by their claims
    users: tuple[UserEntry, ...] = ()
    v1_format: bool = False
    source: str = "assay.yaml"
    warnings: tuple[str, ...] = ()
    digest: str = ""
    # the engine's compiled form, attached by the engine on first use (never part of equality
    # or the digest); this module does not know its type
    _engine: Any = field(default=None, repr=False, compare=False)
    # the policies assay.policy.users.for_user made from this one, by the entries that applied
    _users: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.digest:
            object.__setattr__(self, "digest", jcs_digest(self.to_dict()))

    @property
    def unconstrained_tools(self) -> str:
        return self.enforcement

    @property
    def version_label(self) -> str:
        return self.version if self.version.strip() else "unspecified"

    @property
    def has_allowlist(self) -> bool:
        """An allowlist exists iff ``tools.allow`` or ``tools.allow_classes`` is present."""
        return self.tools.allow is not None or self.tools.allow_classes is not None

    def to_dict(self) -> dict[str, Any]:
        """The normalized model with every field present (``path_confinement``, ``sequences``,
        ``aliases`` and ``limits.tools`` only when set), the input of ``policy_digest``."""
        limits: dict[str, Any] | None = None
        if self.limits is not None:
            limits = {
                "max_requests_total": self.limits.max_requests_total,
                "max_tool_calls_total": self.limits.max_tool_calls_total,
            }
            if self.limits.tools:  # only when present: the digest of a policy without it is unchanged
                limits["tools"] = [rule.to_dict() for rule in self.limits.tools]
        return (
            {
                "version": self.version,
                "name": self.name,
                "tools": self.tools.to_dict(),
                "allow": None,
                "deny": None,
                "schemas": self.schemas,
                "constraints": [],
                "enforcement": {"unconstrained_tools": self.enforcement},
                "limits": limits,
                "signatures": None if self.signatures is None else dict(self.signatures),
                "tool_pins": {k: v.to_dict() for k, v in self.tool_pins.items()},
                "tool_classes": {k: list(v) for k, v in self.tool_classes.items()},
                "discovery": self.discovery,
                "runtime_monitor": self.runtime_monitor,
                "kill_switch": self.kill_switch,
            }
            | (
                # only when present, so the digest of every policy without it is unchanged
                {"path_confinement": [rule.to_dict() for rule in self.path_confinement]}
                if self.path_confinement
                else {}
            )
            | ({"sequences": [rule.to_dict() for rule in self.sequences]} if self.sequences else {})
            | (
                {"aliases": {k: [_selector_dict(m) for m in v] for k, v in self.aliases.items()}}
                if self.aliases
                else {}
            )
            | {
                key: value.to_dict()
                for key, value in (("inspect", self.inspect), ("resources", self.resources), ("prompts", self.prompts))
                if value is not None  # only when present: the digest of a policy without them is unchanged
            }
            | ({"users": [entry.to_dict() for entry in self.users]} if self.users else {})
        )

    def classes_for(self, tool_name: str) -> tuple[str, ...]:
        """The tool's class set, sorted; empty if the tool is not listed."""
        return self.tool_classes.get(tool_name, ())
