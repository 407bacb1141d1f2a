"""A server line read and judged under one tool's (or method's) settings, and rewritten when
an action changed it (sans-IO; docs/inspect.md, "Where wrap looks").

The inspection room (:mod:`assay.session.inspection`) judges answers with it, the room of the
server's own messages (:mod:`assay.session.server_messages`) requests and notifications:

- :func:`read`: the JSON value of a line, strictly and fast, else as leniently as the clients
  read it (:mod:`assay.session.serverlines`); :func:`plain_result`: whether an answer is one every
  client reads alike, from its members alone;
- :func:`judge`: what the detectors found in a value (:func:`assay.inspect.scan.scan`) and
  what the settings make of it: the reason it is blocked, or the action taken;
- :func:`rewritten`: the line with the changed strings replaced (every other byte kept), or
  written anew from the reading when it is not valid UTF-8; None when it cannot be written;
- the shapes of a line's first bytes that the size ceilings need (:func:`id_before`,
  :func:`names_a_method`, :func:`head_id`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from assay.inspect.scan import NOTHING, Scan, scan, splice
from assay.session import serverlines
from assay.session.heads import read_head
from assay.session.requests import encode

if TYPE_CHECKING:
    from assay.policy.inspecting import Settings

__all__ = [
    "Verdict",
    "head_id",
    "id_before",
    "judge",
    "names_a_method",
    "plain_result",
    "read",
    "read_checked",
    "rewritten",
    "stricter",
    "utf8",
]

_decode = msgspec.json.Decoder().decode
# how strict each action is, for :func:`stricter` (detect: what the flow rules' selectors need)
_SECRET_ORDER = {"off": 0, "detect": 1, "flag": 2, "mask": 3, "block": 4}
_INJECTION_ORDER = {"off": 0, "detect": 1, "flag": 2, "strip": 3, "block": 4}


def read(line: bytes) -> Any:
    """The JSON value of a held server line (the usual line: strict and fast; anything else as
    leniently as the clients read it), or a :mod:`~assay.session.serverlines` marker."""
    return read_checked(line)[0]


def read_checked(line: bytes) -> tuple[Any, bool]:
    """:func:`read`, and whether the line is known to be valid UTF-8: the strict reader
    accepted it (it refuses a string that is not valid UTF-8, and JSON has nothing else
    outside its strings than ASCII)."""
    try:
        return _decode(line), True
    except (msgspec.DecodeError, ValueError, RecursionError, MemoryError):
        return serverlines.read_line(line), False


class _Result(msgspec.Struct):
    resultType: Any = msgspec.UNSET


class _Answer(msgspec.Struct):
    """The members of an answer that say whether every client reads it alike (docs/inspect.md,
    "Malformed answers") and whether its result asks for input."""

    method: Any = msgspec.UNSET
    result: _Result | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_read_answer = msgspec.json.Decoder(_Answer).decode
_INPUT: Final = b"input_required"


def plain_result(line: bytes, head: Any = None) -> bool:
    """Whether ``line`` is an answer every client reads alike whose result asks for nothing: a
    ``result`` object that is not ``input_required``, no ``error``, no ``method``. Read from
    those members alone (the rest of the line is skipped, not built; its strings are not
    checked as UTF-8 here), or from ``head``: the line's ``method``, ``result`` and ``error`` as
    the server side read them (``msgspec.Raw``, or ``UNSET`` when absent). False when it cannot
    tell."""
    if head is not None:
        result = head.result
        return (
            result.__class__ is msgspec.Raw
            and head.error is msgspec.UNSET
            and head.method.__class__ is not str
            and memoryview(result)[0] == 0x7B
            and line.find(_INPUT) < 0
        )  # "{"; (find: no int tried first)
    try:
        answer = _read_answer(line)
    except (msgspec.DecodeError, ValueError, RecursionError, MemoryError):
        return False
    found = answer.result
    return (
        isinstance(found, _Result)
        and answer.error is msgspec.UNSET
        and answer.method.__class__ is not str
        and found.resultType != "input_required"
    )


class Verdict(NamedTuple):
    """What :func:`judge` made of a value: the scan, its findings as records show them, the
    reason it is blocked (None: relayed, changed or not) and the action taken."""

    found: Scan
    findings: list[dict[str, str]]
    blocked: str | None
    action: str


def judge(value: Any, settings: Settings, user: Callable[[str], Any] | None, blobs: int) -> Verdict:
    """``value`` read under ``settings``; ``blobs``: how much base64 is decoded (docs/inspect.md,
    "Blobs")."""
    found = scan(
        value,
        secrets_on=settings.secrets != "off",
        injection_on=settings.injection != "off",
        mask=settings.secrets == "mask",
        strip=settings.injection == "strip",
        user=user,
        blobs=blobs,
    )
    if found is NOTHING:
        return _CLEAN
    if not found.findings:
        return Verdict(found, [], None, "")
    findings = [f.to_dict() for f in found.findings]
    kinds = found.kinds
    if "limits" in kinds and (settings.secrets in ("mask", "block") or settings.injection in ("strip", "block")):
        # some strings were not looked at (too deep, too many): never relayed unread
        return Verdict(found, findings, "is too deep or too large to read whole", "block")
    if ("secrets" in kinds and settings.secrets == "block") or ("injection" in kinds and settings.injection == "block"):
        return Verdict(found, findings, "held " + _what(kinds), "block")
    acts = []
    if "secrets" in kinds and settings.secrets == "mask":
        acts.append("mask")
    if "injection" in kinds and settings.injection == "strip":
        acts.append("strip")
    return Verdict(found, findings, None, "+".join(acts) or "flag")


_CLEAN = Verdict(NOTHING, [], None, "")  # nothing found, nothing changed (never mutated)


def _what(kinds: frozenset[str]) -> str:
    parts = []
    if "secrets" in kinds:
        parts.append("a secret")
    if "injection" in kinds:
        parts.append("instructions aimed at the model")
    return " and ".join(parts) or "something the policy blocks"


def stricter(a: Settings, b: Settings) -> Settings:
    """Each action of ``a`` and ``b``, the stricter one (what a part judged under both gets)."""
    secrets = a.secrets if _SECRET_ORDER.get(a.secrets, 0) >= _SECRET_ORDER.get(b.secrets, 0) else b.secrets
    injection = (
        a.injection if _INJECTION_ORDER.get(a.injection, 0) >= _INJECTION_ORDER.get(b.injection, 0) else b.injection
    )
    return replace(a, secrets=secrets, injection=injection, taint=a.taint or b.taint)


def utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def rewritten(line: bytes, message: Any, changed: dict[str, str], valid: bool = False) -> bytes | None:
    """``line`` with each string in ``changed`` replaced, every other byte as the server wrote
    it; written anew from ``message`` (the reading that was judged) when the line is not valid
    UTF-8 or no token could be replaced. None when it cannot be written. ``valid``: the line is
    known to be valid UTF-8 (:func:`read_checked`), not looked at again."""
    if valid or utf8(line):
        if not changed:
            return line
        spliced = splice(line, changed)
        if spliced is not None:
            return spliced
    try:
        return encode(_replace_strings(message, changed))
    except (TypeError, ValueError, RecursionError):
        return None


def _replace_strings(value: Any, changed: dict[str, str], depth: int = 0) -> Any:
    if depth > 200:
        raise RecursionError("nested too deep to rewrite")
    cls = value.__class__
    if cls is str:
        return changed.get(value, value)
    if cls is dict:
        return {
            changed.get(k, k) if k.__class__ is str else k: _replace_strings(v, changed, depth + 1)
            for k, v in value.items()
        }
    if cls is list:
        return [_replace_strings(v, changed, depth + 1) for v in value]
    return value


def head_id(line: bytes) -> Any:
    """The top-level ``id`` of a line (an integer or a string), or None."""
    try:
        head = read_head(line)
    except Exception:  # noqa: BLE001 - any line: the id is only for the reply
        return None
    return None if head.id.__class__ not in (int, str) else head.id


def names_a_method(head: bytes) -> bool:
    """Whether the first bytes of a line hold a top-level ``method`` before any ``result``."""
    at = head.find(b'"method"')
    return at > 0 and (head.find(b'"result"') < 0 or at < head.find(b'"result"'))


def id_before(head: bytes, members: tuple[bytes, ...] = (b'"result"', b'"error"')) -> Any:
    """The top-level ``id`` of a line that comes before one of ``members`` (the first bytes of
    the line), or None."""
    import json

    for member in members:
        at = head.find(member)
        if at <= 0:
            continue
        prefix = head[:at].rstrip()
        if not prefix.endswith((b",", b"{")):
            continue
        try:
            doc = json.loads(prefix.rstrip(b",") + b"}")
        except (ValueError, RecursionError):
            continue
        if isinstance(doc, dict) and doc.get("id").__class__ in (int, str):
            return doc["id"]
    return None
