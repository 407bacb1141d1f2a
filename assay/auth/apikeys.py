"""API keys of `assay mcp serve` (docs/serve.md, "Identity"): a file of hashes. Sans-IO: the
file's bytes in, a :class:`KeyTable` out; a presented key in, its :class:`ApiKey` or None.

One key a line: ``<id> sha256:<hex> [claim=value ...]``. ``#`` starts a comment line; blank
lines are skipped. The id (``[A-Za-z0-9][A-Za-z0-9._@-]{0,63}``) is who the key is: the agent
session ``key:<id>`` and the records' subject. The digest is SHA-256 of the key's UTF-8 bytes,
64 hex digits. Claims are what policy ``when: claims`` reads; a claim named twice is a list
(``groups=ops groups=sre``), once a string; ``sub`` is the id and cannot be set. Two lines with
the same id or the same digest are a config problem, as is any malformed line (each one line,
naming the file and line, never a digest).

A presented key is hashed and compared with every digest of the table in constant time
(:func:`hmac.compare_digest`, no early exit), so the time taken says nothing of which digest
came close.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from assay.gateway.config import ConfigError
from assay.gateway.contract import Identity

__all__ = ["ApiKey", "KeyTable", "digest_line", "parse_api_keys"]

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
_DIGEST = re.compile(r"sha256:([0-9a-fA-F]{64})")
_CLAIM = re.compile(r"([A-Za-z_][A-Za-z0-9_.:-]{0,63})=(\S{1,256})")
_MAX_KEYS = 10_000


@dataclass(frozen=True)
class ApiKey:
    id: str
    digest: bytes = field(repr=False)
    claims: Mapping[str, Any] = field(default_factory=dict)

    def identity(self) -> Identity:
        return Identity(key=f"key:{self.id}", subject=self.id, claims=self.claims)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def digest_line(key_id: str, key: str) -> str:
    """The line of a key (what ``printf %s KEY | sha256sum`` gives, with the id before it)."""
    return f"{key_id} sha256:{_digest(key).hex()}"


class KeyTable:
    def __init__(self, keys: tuple[ApiKey, ...]) -> None:
        self.keys = keys

    def __len__(self) -> int:
        return len(self.keys)

    def find(self, presented: str) -> ApiKey | None:
        """The key whose digest is the presented key's; every digest is compared."""
        digest = _digest(presented)
        found: ApiKey | None = None
        for key in self.keys:
            if hmac.compare_digest(key.digest, digest) and found is None:
                found = key
        return found


def _line(number: int, text: str, where: str, problems: list[str]) -> ApiKey | None:
    fields = text.split()
    if len(fields) < 2:
        problems.append(f"{where}:{number}: expected `<id> sha256:<hex> [claim=value ...]`")
        return None
    key_id, digest, *claim_fields = fields
    ok = True
    if not _ID.fullmatch(key_id):
        problems.append(f"{where}:{number}: the id must match [A-Za-z0-9][A-Za-z0-9._@-]{{0,63}}")
        ok = False
    found = _DIGEST.fullmatch(digest)
    if found is None:
        problems.append(f"{where}:{number}: the second field must be sha256: and 64 hex digits")
        ok = False
    claims: dict[str, Any] = {}
    for item in claim_fields:
        claim = _CLAIM.fullmatch(item)
        if claim is None:
            problems.append(f"{where}:{number}: a claim must be name=value (name: letters, digits, _ . : -)")
            ok = False
            continue
        name, value = claim.groups()
        if name == "sub":
            problems.append(f"{where}:{number}: the claim sub is the key's id and cannot be set")
            ok = False
            continue
        held = claims.get(name)
        if held is None:
            claims[name] = value
        elif isinstance(held, list):
            held.append(value)
        else:
            claims[name] = [held, value]
    if not ok or found is None:
        return None
    claims["sub"] = key_id
    return ApiKey(key_id, bytes.fromhex(found.group(1)), claims)


def parse_api_keys(data: bytes, where: str) -> KeyTable:
    """The key file's bytes -> its table; every problem one line (:class:`ConfigError`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError([f"{where}: not UTF-8 text"]) from None
    problems: list[str] = []
    keys: list[ApiKey] = []
    ids: dict[str, int] = {}
    digests: dict[bytes, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key = _line(number, line, where, problems)
        if key is None:
            continue
        if key.id in ids:
            problems.append(f"{where}:{number}: the id {key.id} is already on line {ids[key.id]}")
            continue
        if key.digest in digests:
            problems.append(f"{where}:{number}: the same key as line {digests[key.digest]} (one key, one id)")
            continue
        ids[key.id] = number
        digests[key.digest] = number
        keys.append(key)
    if len(keys) > _MAX_KEYS:
        problems.append(f"{where}: more than {_MAX_KEYS} keys")
    if not keys and not problems:
        problems.append(f"{where}: no key")
    if problems:
        raise ConfigError(problems)
    return KeyTable(tuple(keys))
