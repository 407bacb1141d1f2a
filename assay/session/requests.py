"""The requests other than ``tools/call`` that reach a server's data, judged against the
policy's ``resources`` and ``prompts`` (docs/policy.md, "Resources and prompts"; sans-IO).

``resources/read`` and ``resources/subscribe`` by their ``uri`` (``resources`` allow and deny
patterns over each reading of the URI, and a ``file:`` URI inside some ``path_confinement``
directory), ``prompts/get`` by its ``name`` (``prompts``), ``completion/complete`` by the prompt
or resource its ``ref`` names.
:func:`judge_request` says what a request is and whether it is refused; :func:`decision_of` is
its :class:`~assay.policy.Decision` (recorded like a tool call's); :func:`error_line` the
JSON-RPC error a refused request gets.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NamedTuple

from assay.policy import Decision, Policy
from assay.policy.fileuri import FileUriRefused, is_file_uri

if TYPE_CHECKING:  # (an annotation: the rules are read only for a policy with resources or prompts)
    from assay.policy.inspecting import ListRules

__all__ = [
    "BLOCKED_CODE",
    "JUDGED_METHODS",
    "PROMPT_DENIED",
    "RESOURCE_DENIED",
    "Judged",
    "decision_of",
    "encode",
    "error_line",
    "judge_request",
    "outbound_values",
]

RESOURCE_DENIED = "E_RESOURCE_DENIED"
PROMPT_DENIED = "E_PROMPT_DENIED"
PATH_CONFINEMENT = "E_PATH_CONFINEMENT"
BLOCKED_CODE = -32003  # the JSON-RPC error code of a refused request, and of a blocked resource answer
_BLOCKED_MESSAGE = "Content blocked by policy"
_RESOURCE_METHODS = ("resources/read", "resources/subscribe")
JUDGED_METHODS = frozenset({"resources/read", "resources/subscribe", "prompts/get", "completion/complete"})
_REASON_MAX = 600


class Judged(NamedTuple):
    """A judged request: its method, its target (URI or prompt name), the section that judges it
    (``resources`` or ``prompts``), and the refusal's code and reason (None: let through)."""

    method: str
    target: str
    section: str
    code: str | None = None
    why: str | None = None


def judge_request(policy: Policy, frame: dict[str, Any]) -> Judged | None:
    """``frame`` judged, or None when it is no request the policy's sections judge (another
    method, or a completion of neither a prompt nor a resource)."""
    method = frame.get("method")
    params = frame.get("params")
    params = params if isinstance(params, dict) else {}
    if method in _RESOURCE_METHODS:
        return _resource(policy, method, _text(params.get("uri")))
    if method == "prompts/get":
        return _prompt(policy, method, _text(params.get("name")))
    if method == "completion/complete":
        ref = params.get("ref")
        ref = ref if isinstance(ref, dict) else {}
        if ref.get("type") == "ref/prompt":
            return _prompt(policy, method, _text(ref.get("name")))
        if ref.get("type") == "ref/resource":
            return _resource(policy, method, _text(ref.get("uri")))
    return None


def outbound_values(frame: dict[str, Any]) -> dict[str, Any] | None:
    """What a judged request sends to the server that a value taint or a secret could ride on
    (docs/policy.md, "Inspecting what comes back"): a resource's ``uri``, a prompt's
    ``arguments``, a completion's ``argument`` and ``context``; None when it sends nothing."""
    params = frame.get("params")
    if not isinstance(params, dict):
        return None
    out = {key: params[key] for key in ("uri", "arguments", "argument", "context") if key in params}
    return out or None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _resource(policy: Policy, method: str, uri: str) -> Judged:
    rules = policy.resources
    confined = bool(policy.path_confinement) and is_file_uri(uri)
    if rules is not None:
        why = _listed(rules, uri, confined)
        if why is not None:
            return Judged(method, uri, "resources", RESOURCE_DENIED, why)
    if confined:
        why = _outside_confinement(policy, uri)
        if why is not None:
            return Judged(method, uri, "resources", PATH_CONFINEMENT, f"resource {why}")
    return Judged(method, uri, "resources")


def _listed(rules: ListRules, uri: str, confined: bool) -> str | None:
    """Why ``resources`` refuses the URI: a reading of it denied or not allowed, or a ``file:``
    URI that servers read differently (docs/policy.md, "Resources and prompts"); that one is
    left to path confinement when the policy confines paths (``confined``), which refuses it as
    it refuses such a path argument."""
    from assay.policy.urinames import readings  # only a policy with a resources section reads URIs

    try:
        names = readings(uri)
    except FileUriRefused as exc:
        return None if confined else f"resource {uri!r} is not read the same way by every server: {exc}"
    refused = rules.refusal_of(names)
    if refused is None:
        return None
    which, name = refused
    read_as = "" if name == uri else f" (read as {name!r})"
    listed = "denied by resources.deny" if which == "deny" else "not in resources.allow"
    return f"resource {uri!r}{read_as} is {listed}"


def _prompt(policy: Policy, method: str, name: str) -> Judged:
    rules = policy.prompts
    which = None if rules is None else rules.refusal(name)
    if which is None:
        return Judged(method, name, "prompts")
    listed = "denied by prompts.deny" if which == "deny" else "not in prompts.allow"
    return Judged(method, name, "prompts", PROMPT_DENIED, f"prompt {name!r} is {listed}")


def _outside_confinement(policy: Policy, uri: str) -> str | None:
    """Why the ``file:`` URI is outside every directory the policy's path rules confine to (a
    resource read reaches what some tool may reach, no more)."""
    from assay.policy.paths import confinement_violation

    rules = policy.path_confinement
    within = tuple(d for rule in rules for d in rule.within)
    resolve = any(rule.resolve_symlinks for rule in rules)
    return confinement_violation(uri, within=within, resolve_symlinks=resolve)


def judges(policy: Policy, judged: Judged) -> bool:
    """Whether the policy has a section that judged this request (then it is recorded)."""
    if judged.section == "prompts":
        return policy.prompts is not None
    return policy.resources is not None or bool(policy.path_confinement and is_file_uri(judged.target))


def shown(text: str) -> str:
    """A target or reason as records and replies show it: cut, and any secret in it (a token in
    a URL's query) redacted (docs/inspect.md, "Secrets")."""
    from assay.inspect.secrets import redact_text

    return redact_text(text)[0][:_REASON_MAX]  # redacted whole first: a cut could split a secret


def contract_of(judged: Judged) -> dict[str, Any]:
    return {
        "status": "deny",
        "error_code": judged.code,
        "method": judged.method,
        "target": shown(judged.target)[:256],
        "reason": None if judged.why is None else shown(judged.why),
    }


def decision_of(policy: Policy, judged: Judged) -> Decision:
    """The decision recorded for the request: its tool is ``<method> <target>``."""
    tool = f"{judged.method} {shown(judged.target)}"[:300]
    if judged.code is None:
        return Decision(
            "allow", tool, matched_rule=judged.section, policy_version=policy.version_label, policy_digest=policy.digest
        )
    contract = contract_of(judged)
    return Decision(
        "deny",
        tool,
        reason_code=judged.code,
        reason=contract["reason"],
        contract=contract,
        typed_decision="deny",
        matched_rule=judged.section,
        policy_version=policy.version_label,
        policy_digest=policy.digest,
    )


def error_line(rid: Any, contract: dict[str, Any]) -> bytes:
    """The JSON-RPC error a refused request (or a blocked resource answer) gets, without its LF."""
    rid = rid if rid.__class__ in (int, str) else None
    return encode(
        {"jsonrpc": "2.0", "id": rid, "error": {"code": BLOCKED_CODE, "message": _BLOCKED_MESSAGE, "data": contract}}
    )


def encode(obj: Any) -> bytes:
    """``obj`` as one JSON line without its LF (ASCII escapes); TypeError, ValueError or
    RecursionError when it cannot be written."""
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")
