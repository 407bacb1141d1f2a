"""Sealed 2025-era session ids, sans-IO (docs/serve.md, "Several replicas").

With the config's ``session_key``, the ``Mcp-Session-Id`` a gateway answers ``initialize`` with
carries what another gateway (a replica behind the same load balancer) needs to go on with the
session: the negotiated protocol version, the client's capabilities and its ``clientInfo``, and
when the id expires. It is sealed with AES-256-GCM: the key is derived once from the config's
secret when the gateway starts (no per-request derivation), each id has a fresh random 96-bit
nonce, and the user it belongs to (:attr:`~assay.gateway.contract.Identity.key`) is the
associated data, so the id opens only for that user: another user's presentation fails to open,
as an unknown id does (the front answers both 404).

The id is ``s1.`` and the URL-safe base64 (no padding) of ``nonce || ciphertext+tag``: visible
ASCII, as a header value must be. No trio, no clock of its own: ``now`` (seconds since the epoch)
comes from the caller.

Keys rotate: a sealer seals with its key and also opens ids sealed with the ``previous`` keys (the
config's ``session_key_previous``), so replicas given a new key keep their clients' sessions
until those ids expire.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["MAX_SEALED_BYTES", "PREFIX", "Resumable", "Sealer"]

PREFIX = "s1."
#: the sealed state's JSON is kept under this (the id stays far below the header limits of
#: proxies and servers, 8 KiB and more); larger client capabilities are cut down to their names
MAX_SEALED_BYTES = 2048
_NONCE = 12
_TAG = 16
_CONTEXT = b"assay serve session id v1\x00"


@dataclass(frozen=True)
class Resumable:
    """What a sealed id says of its session: enough to open the conversation again."""

    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any]
    #: seconds since the epoch after which the id is refused
    expires: int

    def initialize(self) -> dict[str, Any]:
        """The ``initialize`` request the session began with, for ``Gateway.open``."""
        params = {"protocolVersion": self.version, "capabilities": self.capabilities, "clientInfo": self.client_info}
        return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}


class _State(msgspec.Struct, array_like=True, frozen=True):
    v: str
    caps: dict[str, Any]
    info: dict[str, Any]
    exp: int


def _owner_data(owner: str) -> bytes:
    return _CONTEXT + owner.encode("utf-8", "surrogatepass")


def _aead_of(secret: bytes) -> AESGCM:
    if len(secret) < 16:
        raise ValueError("the session key must be at least 16 bytes")
    return AESGCM(hashlib.sha256(_CONTEXT + secret).digest())


class Sealer:
    """Seals session ids with one key and opens those of that key or of the ``previous`` ones
    (each derived from its secret here, once)."""

    def __init__(
        self,
        secret: bytes,
        max_age_s: float,
        random: Callable[[int], bytes] = os.urandom,
        previous: Sequence[bytes] = (),
    ) -> None:
        self._aead = _aead_of(secret)
        self._opens = (self._aead, *(_aead_of(old) for old in previous))
        self.max_age_s = max_age_s
        self._random = random

    def seal(self, owner: str, version: str, params: Mapping[str, Any], now: float) -> str:
        """The id of a new session of ``owner`` that negotiated ``version``; ``params`` are its
        ``initialize`` params (capabilities, clientInfo)."""
        caps = params.get("capabilities")
        info = params.get("clientInfo")
        state = _State(
            version,
            caps if isinstance(caps, dict) else {},
            info if isinstance(info, dict) else {},
            int(now + self.max_age_s),
        )
        plain = msgspec.json.encode(state)
        if len(plain) > MAX_SEALED_BYTES:  # what a client declares is its own: kept, but bounded
            name = state.info.get("name")
            ver = state.info.get("version")
            info = {
                "name": name if isinstance(name, str) else "unknown",
                "version": ver if isinstance(ver, str) else "0",
            }
            state = _State(version, {k: {} for k in list(state.caps)[:16]}, info, state.exp)
            plain = msgspec.json.encode(state)
            if len(plain) > MAX_SEALED_BYTES:
                state = _State(version, {}, {"name": "unknown", "version": "0"}, state.exp)
                plain = msgspec.json.encode(state)
        nonce = self._random(_NONCE)
        sealed = nonce + self._aead.encrypt(nonce, plain, _owner_data(owner))
        return PREFIX + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")

    def open(self, session_id: str, owner: str, now: float) -> Resumable | None:
        """What the id says, when it was sealed with this key or a previous one for ``owner`` and
        has not expired; None otherwise (an id of another user, of another key, altered, expired,
        or no sealed id)."""
        if not session_id.startswith(PREFIX) or len(session_id) > 4 * MAX_SEALED_BYTES:
            return None
        text = session_id[len(PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            return None
        if len(raw) < _NONCE + _TAG or base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != text:
            return None  # one id, one spelling: the table of a gateway is keyed by the text
        plain = None
        for aead in self._opens:
            try:
                plain = aead.decrypt(raw[:_NONCE], raw[_NONCE:], _owner_data(owner))
                break
            except InvalidTag:
                continue
        if plain is None:
            return None
        try:
            state = msgspec.json.decode(plain, type=_State)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        if now >= state.exp:
            return None
        return Resumable(state.v, dict(state.caps), dict(state.info), state.exp)
