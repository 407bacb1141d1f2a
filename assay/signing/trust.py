"""The trust policy (docs/tool-signing.md, "3. Verify"): which signing keys count. Sans-IO."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from assay.signing.model import SigningError

__all__ = ["TrustedKey", "TrustPolicy", "parse_trust_policy"]


@dataclass(frozen=True)
class TrustedKey:
    key_id: str
    public_key_path: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class TrustPolicy:
    """Which signing keys count (docs/tool-signing.md, '3. Verify')."""

    require_signed: bool = False
    trusted_key_ids: tuple[str, ...] = ()
    trusted_keys: tuple[TrustedKey, ...] = field(default_factory=tuple)

    def is_key_trusted(self, kid: str) -> bool:
        """Listed in either list. A policy that lists no key trusts no key."""
        return kid in self.trusted_key_ids or any(entry.key_id == kid for entry in self.trusted_keys)


_POLICY_KEYS = ("require_signed", "trusted_key_ids", "trusted_keys")
_ENTRY_KEYS = ("key_id", "public_key_path", "name")


def parse_trust_policy(text: str) -> TrustPolicy:
    """Parse trust-policy YAML. Unknown keys are refused: a misspelt ``require_signed`` must not
    silently turn verification off."""
    from assay.policy.yamlio import YamlStructureError, YamlSyntaxError, parse_yaml

    try:
        doc = parse_yaml(text)  # YAML 1.2 scalars, duplicate keys refused, expansion budgeted
    except YamlSyntaxError as exc:
        where = f" at line {exc.line} column {exc.column}" if exc.line else ""
        raise SigningError(f"failed to parse trust policy YAML: {exc}{where}") from None
    except YamlStructureError as exc:
        raise SigningError(f"failed to parse trust policy YAML: {exc}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise SigningError("failed to parse trust policy YAML: the document must be a mapping")
    for name in doc:
        if name not in _POLICY_KEYS:
            raise SigningError(f"failed to parse trust policy YAML: unknown field {json.dumps(str(name))}")
    require = doc.get("require_signed", False)
    if not isinstance(require, bool):
        raise SigningError("failed to parse trust policy YAML: require_signed must be true or false")
    ids = doc.get("trusted_key_ids") or []
    if not isinstance(ids, list) or not all(isinstance(item, str) for item in ids):
        raise SigningError("failed to parse trust policy YAML: trusted_key_ids must be a list of strings")
    entries = doc.get("trusted_keys") or []
    if not isinstance(entries, list):
        raise SigningError("failed to parse trust policy YAML: trusted_keys must be a list")
    keys = []
    for index, entry in enumerate(entries):
        where = f"trusted_keys[{index}]"
        if not isinstance(entry, dict):
            raise SigningError(f"failed to parse trust policy YAML: {where} must be a mapping")
        for name in entry:
            if name not in _ENTRY_KEYS:
                raise SigningError(
                    f"failed to parse trust policy YAML: unknown field {json.dumps(str(name))} in {where}"
                )
        if not isinstance(entry.get("key_id"), str):
            raise SigningError(f"failed to parse trust policy YAML: {where}.key_id must be a string")
        for name in ("public_key_path", "name"):
            if entry.get(name) is not None and not isinstance(entry[name], str):
                raise SigningError(f"failed to parse trust policy YAML: {where}.{name} must be a string")
        keys.append(TrustedKey(entry["key_id"], entry.get("public_key_path"), entry.get("name")))
    return TrustPolicy(require_signed=require, trusted_key_ids=tuple(ids), trusted_keys=tuple(keys))
