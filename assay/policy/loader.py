"""Reading ``assay.yaml`` into a :class:`~assay.policy.model.Policy` (docs/policy.md, 'Loading').

``load_policy(bytes) -> Policy``: decode, parse YAML 1.2 within the expansion budget
(:mod:`assay.policy.yamlio`), check the root, convert field by field into frozen values
(:mod:`assay.policy.convert`, class ``structure`` on any type mismatch), warn about unknown keys
and about schema references that can never resolve, merge legacy root ``allow``/``deny``, migrate
v1 ``constraints`` into schemas, validate pins, path confinement and kill-switch triggers (class
``validation``), and compute ``policy_digest`` over the JCS form of the normalized model.
``load_policy`` does no I/O; a policy *file* is read by :mod:`assay.policy.files`
(:func:`load_policy_file`, the one entry every command uses), which calls this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.inputs import DEFAULT_POLICY_BYTES
from assay.policy.convert import STRICT_V1_MESSAGE, V1_DEPRECATION_WARNING, convert
from assay.policy.engine import compile_policy
from assay.policy.errors import PolicyError
from assay.policy.model import Policy
from assay.policy.reader import Structure
from assay.policy.reader import type_name
from assay.policy.sections import MAX_WINDOW_CALLS

__all__ = [
    "load_policy",
    "parse_policy_bytes",
    "policy_from_document",
    "V1_DEPRECATION_WARNING",
    "STRICT_V1_MESSAGE",
    "MAX_WINDOW_CALLS",
]


def load_policy(
    data: bytes,
    *,
    source: str = "assay.yaml",
    strict_deprecations: bool = False,
    warn: Callable[[str], object] | None = None,
    byte_ceiling: int = DEFAULT_POLICY_BYTES,
    home: str | None = None,
) -> Policy:
    """Bytes of an ``assay.yaml`` → :class:`Policy`, or :class:`PolicyError`.

    ``source`` names the file in messages. ``byte_ceiling`` is the policy byte ceiling the
    bytes were read under; alias expansion is budgeted from it (:func:`parse_yaml`).
    ``strict_deprecations`` is the strict mode (``--deny-deprecations`` /
    ``ASSAY_STRICT_DEPRECATIONS=1``; the caller reads the environment). ``warn`` receives each
    warning line (unknown keys, v1 deprecation, no-effect keys), prefixed with the source; the
    same lines stay on ``Policy.warnings`` without the prefix. ``home`` is the home directory
    of the user the policy is loaded for: a path rule's ``~`` and ``$HOME`` stand for it (the
    file layer passes :func:`~assay.policy.files.user_home`); with ``None`` they are refused.
    """
    doc = parse_policy_bytes(data, source=source, byte_ceiling=byte_ceiling)
    return policy_from_document(doc, source=source, strict_deprecations=strict_deprecations, warn=warn, home=home)


def parse_policy_bytes(data: bytes, *, source: str = "assay.yaml", byte_ceiling: int = DEFAULT_POLICY_BYTES) -> Any:
    """The first half of :func:`load_policy`: bytes -> the parsed YAML document (plain dicts,
    lists and scalars), or :class:`PolicyError` (classes ``syntax``, ``structure``). The only
    step that needs PyYAML (imported here, on first use)."""
    if isinstance(data, str):
        raise TypeError("load_policy takes bytes")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError("syntax", f"invalid UTF-8 at byte {exc.start}", source=source) from None
    from assay.policy.yamlio import YamlStructureError, YamlSyntaxError, parse_yaml

    try:
        return parse_yaml(text, byte_ceiling=byte_ceiling)
    except YamlSyntaxError as exc:
        raise PolicyError("syntax", f"invalid YAML: {exc}", source=source, line=exc.line, column=exc.column) from None
    except YamlStructureError as exc:
        raise PolicyError("structure", str(exc), source=source) from None


def policy_from_document(
    doc: Any,
    *,
    source: str = "assay.yaml",
    strict_deprecations: bool = False,
    warn: Callable[[str], object] | None = None,
    home: str | None = None,
) -> Policy:
    """The second half of :func:`load_policy`: a parsed document (:func:`parse_policy_bytes`)
    -> :class:`Policy`, or :class:`PolicyError`; ``warn`` gets the warnings as load_policy
    gives them."""
    if not isinstance(doc, dict):
        what = "empty document" if doc is None else type_name(doc)
        raise PolicyError("root_not_mapping", f"policy root is not a mapping ({what})", source=source)
    try:
        kwargs, warnings = convert(doc, source, strict_deprecations, home)
        policy = Policy(**kwargs)
        compile_policy(policy)
    except PolicyError as exc:
        if exc.source != source:
            raise PolicyError(exc.kind, exc.detail, source=source) from None
        raise
    except Structure as exc:
        raise PolicyError("structure", f"invalid policy: {exc}", source=source) from None
    except RecursionError:
        raise PolicyError("structure", "invalid policy: nested too deeply", source=source) from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. JCS refusing a value
        raise PolicyError("structure", f"invalid policy: {exc}", source=source) from None
    if warn is not None:
        for line in warnings:
            warn(f"{source}: {line}")
    return policy
