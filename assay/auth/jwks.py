"""The issuer's key set as `assay mcp serve` keeps it (docs/serve.md, "Identity"). Sans-IO: the
shell (:mod:`assay.auth.resource_shell`) fetches, this module decides when and reads what came.

- The key set is fetched when the gateway starts, and kept for the ``max-age`` of the answer's
  ``Cache-Control`` (``no-cache``/``no-store``: the shortest time), within
  [:data:`MIN_TTL`, :data:`MAX_TTL`]; without one, :data:`DEFAULT_TTL`.
- A token whose ``kid`` is not in the set asks for a fetch; fetches (for an unknown ``kid`` or
  an expired set alike) are at most one per ``refetch_interval`` seconds, so a flood of tokens
  with random ``kid`` values costs at most one fetch per interval.
- A fetch that fails, or an answer that is not a key set, leaves the keys held before: they are
  used until a fetch succeeds.

Only signature keys are kept: ``kty`` RSA, EC or OKP (never ``oct``: a symmetric key has no
place in a published key set), ``use`` absent or ``sig``, ``key_ops`` absent or holding
``verify``. A key that does not import is skipped; at most :data:`MAX_KEYS` are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from joserfc.jwk import ECKey, JWKRegistry, OKPKey, RSAKey

from assay.strictjson import StrictJSONError, finite_float, refuse_constant, unique_pairs

__all__ = [
    "DEFAULT_TTL",
    "MAX_KEYS",
    "MAX_TTL",
    "MIN_TTL",
    "REFETCH_INTERVAL",
    "JwksError",
    "KeySetCache",
    "PublicKey",
    "cache_ttl",
    "parse_key_set",
]

PublicKey = RSAKey | ECKey | OKPKey

MIN_TTL = 60.0
MAX_TTL = 24 * 3600.0
DEFAULT_TTL = 600.0
REFETCH_INTERVAL = 30.0
MAX_KEYS = 64
#: the biggest key set the shell reads
MAX_BYTES = 256 * 1024

_MAX_AGE = re.compile(r"(?:^|[\s,])max-age\s*=\s*\"?(\d{1,12})\"?(?:$|[\s,;])", re.IGNORECASE)
_NO_CACHE = re.compile(r"(?:^|[\s,])no-(?:cache|store)(?:$|[\s,;=])", re.IGNORECASE)
_KEY_TYPES = {"RSA": RSAKey, "EC": ECKey, "OKP": OKPKey}


class JwksError(Exception):
    """A key set that could not be had; ``str()`` is one line naming nothing secret."""


def cache_ttl(cache_control: str | None, *, low: float = MIN_TTL, high: float = MAX_TTL) -> float:
    """How long a key set is kept: ``max-age`` within [low, high]; ``no-cache``/``no-store`` the
    lowest; none, :data:`DEFAULT_TTL` (within the bounds too)."""
    if cache_control:
        if _NO_CACHE.search(cache_control):
            return low
        found = _MAX_AGE.search(cache_control)
        if found:
            return min(max(float(found.group(1)), low), high)
    return min(max(DEFAULT_TTL, low), high)


def _json(body: bytes) -> Any:
    try:
        return json.loads(
            body.decode("utf-8"),
            object_pairs_hook=unique_pairs,
            parse_constant=refuse_constant,
            parse_float=finite_float,
        )
    except (UnicodeDecodeError, StrictJSONError, ValueError, RecursionError):
        raise JwksError("the key set is not JSON") from None


def _signature_key(member: Any) -> PublicKey | None:
    if not isinstance(member, dict):
        return None
    kind = _KEY_TYPES.get(member.get("kty"))  # type: ignore[arg-type]
    if kind is None:
        return None
    if member.get("use", "sig") != "sig":
        return None
    ops = member.get("key_ops")
    if ops is not None and (not isinstance(ops, list) or "verify" not in ops):
        return None
    kid = member.get("kid")
    if kid is not None and not isinstance(kid, str):
        return None
    alg = member.get("alg")
    if alg is not None and not isinstance(alg, str):
        return None
    # only the public members: a private key published by mistake is read as its public half
    public = {name: value for name, value in member.items() if name not in ("d", "p", "q", "dp", "dq", "qi", "oth")}
    try:
        key = JWKRegistry.import_key(public, member["kty"])
    except Exception:  # joserfc raises several kinds for a key it cannot read; such a key is skipped
        return None
    if not isinstance(key, (RSAKey, ECKey, OKPKey)):  # pragma: no cover - the kty decided the class
        return None
    return key


def parse_key_set(body: bytes, *, max_keys: int = MAX_KEYS) -> dict[str | None, tuple[PublicKey, ...]]:
    """A JWKS document -> its signature keys by ``kid`` (``None``: keys without one). A document
    that is not a JSON object with a ``keys`` list, or holds no usable key, is a
    :class:`JwksError`."""
    doc = _json(body)
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise JwksError("the key set is not a JSON object with a keys list")
    found: dict[str | None, list[PublicKey]] = {}
    count = 0
    for member in doc["keys"][:max_keys]:
        key = _signature_key(member)
        if key is None:
            continue
        kid = member.get("kid")
        found.setdefault(kid, []).append(key)
        count += 1
    if not count:
        raise JwksError("the key set holds no signature key")
    return {kid: tuple(keys) for kid, keys in found.items()}


class KeySetCache:
    """The keys of one issuer and when to fetch them again. ``now`` is the caller's clock
    (seconds); nothing here reads one."""

    def __init__(
        self,
        *,
        refetch_interval: float = REFETCH_INTERVAL,
        min_ttl: float = MIN_TTL,
        max_ttl: float = MAX_TTL,
        max_keys: int = MAX_KEYS,
    ) -> None:
        self.refetch_interval = refetch_interval
        self.min_ttl = min_ttl
        self.max_ttl = max_ttl
        self.max_keys = max_keys
        self._keys: Mapping[str | None, tuple[PublicKey, ...]] = {}
        self._expires: float | None = None
        self._last_attempt: float | None = None
        #: the last failure, one line (None after a fetch that succeeded)
        self.failure: str | None = None
        #: how many fetches were started (for tests and the start line)
        self.fetches = 0

    @property
    def loaded(self) -> bool:
        return self._expires is not None

    def _may_fetch(self, now: float) -> bool:
        return self._last_attempt is None or now - self._last_attempt >= self.refetch_interval

    def due(self, now: float) -> bool:
        """The set should be fetched before use: never had, or past its time (rate-limited)."""
        stale = self._expires is None or now >= self._expires
        return stale and self._may_fetch(now)

    def may_refetch(self, now: float) -> bool:
        """A token names a ``kid`` the set lacks: may the set be fetched again now?"""
        return self._may_fetch(now)

    def started(self, now: float) -> None:
        """A fetch begins (it counts against the interval whatever its end)."""
        self._last_attempt = now
        self.fetches += 1

    def fetched(self, body: bytes, cache_control: str | None, now: float) -> None:
        """A fetch's answer: the new keys replace the old; a body that is not a key set is a
        :class:`JwksError` and the old keys stay."""
        try:
            keys = parse_key_set(body, max_keys=self.max_keys)
        except JwksError as exc:
            self.failure = str(exc)
            raise
        self._keys = keys
        self._expires = now + cache_ttl(cache_control, low=self.min_ttl, high=self.max_ttl)
        self.failure = None

    def failed(self, reason: str) -> None:
        """A fetch that got no key set: the keys held stay in use."""
        self.failure = reason

    def keys(self, kid: str | None) -> tuple[PublicKey, ...]:
        """The keys a token with this ``kid`` may be signed with: those with that ``kid``; for a
        token without one, every key of the set."""
        if kid is None:
            return tuple(key for keys in self._keys.values() for key in keys)
        return self._keys.get(kid, ())
