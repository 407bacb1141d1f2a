"""Signed approvals of the 2026-07-28 era, for a session whose retries may reach another process
(``assay mcp serve``: docs/serve.md, "Approvals"). Sans-IO: the wall clock is injected.

:class:`~assay.session.approvals.offers.Offers` keeps each open approval in the session's memory,
so only the session that asked can take the retry. :class:`SignedOffers` keeps nothing open: the
``requestState`` itself carries what the retry needs, signed with the gateway's key, and binds
the approval to

- the user (the agent session's key) and the upstream (the session's label),
- this exact call (the digest of the tool name and the arguments),
- an expiry (wall-clock seconds: the approval timeout after it was asked),
- a one-time nonce.

A used nonce is remembered until its expiry in the approvals guard's shared state (a
:class:`~assay.policy.shared.Part` named ``approvals``), so with a shared session store every
link of the user, in every process on that store, takes one retry of an approval once: the
retry's decision runs inside the store's transaction, which reads and writes the used nonces
with the rest of the session's state.

The state is ``assay-approval.2.<payload>.<mac>``: ``payload`` is the base64url (no padding) of
the JSON ``{"n": nonce, "e": expiry, "r": first-round members}`` and ``mac`` the hex
HMAC-SHA256 over the user, the upstream, the call's digest and the payload.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable
from typing import Any, Final

from assay.session.approvals.offers import _MRTR_MEMBERS, STATE_PREFIX, Offer, call_digest

__all__ = ["MAX_STATE_PAYLOAD", "MAX_USED", "SignedOffers"]

MAX_STATE_PAYLOAD: Final = 16 << 10  # bytes of a state's payload (its first-round members with it)
MAX_USED: Final = 4096  # used nonces remembered (until their expiry) per agent session
_VERSION: Final = "2."
_STATE = re.compile(r"assay-approval\.2\.([A-Za-z0-9_-]{1,22000})\.([0-9a-f]{64})")
_NONCE = re.compile(r"[0-9a-f]{32}")


class SignedOffers:
    """The 2026-07-28-era approvals of one session, signed with ``key`` (at least 16 bytes) for
    the user ``subject`` and the upstream ``server``; ``wall`` is the clock expiries are read
    on; ``ttl`` the approval timeout in seconds. Nothing is held open: :attr:`held_bytes` is 0."""

    __slots__ = ("_key", "_bound", "_wall", "ttl", "used", "held_bytes", "limit")

    def __init__(self, key: bytes, subject: str, server: str, wall: Callable[[], float], ttl: float) -> None:
        if len(key) < 16:
            raise ValueError("an approval key is at least 16 bytes")
        self._key = bytes(key)
        bound = subject.encode("utf-8", "surrogatepass") + b"\0" + server.encode("utf-8", "surrogatepass")
        self._bound = hashlib.sha256(bound).digest()
        self._wall = wall
        self.ttl = ttl
        self.used: dict[str, float] = {}  # nonce -> expiry: retries taken (the shared part)
        self.held_bytes = 0
        self.limit = MAX_USED

    def __len__(self) -> int:
        return 0

    def _mac(self, digest: bytes, payload: str) -> str:
        data = b"assay-approval/2\0" + self._bound + digest + payload.encode("ascii")
        return hmac.new(self._key, data, hashlib.sha256).hexdigest()

    @staticmethod
    def claims(params: Any) -> bool:
        state = params.get("requestState") if isinstance(params, dict) else None
        return state.__class__ is str and state.startswith(STATE_PREFIX)

    def issue(self, name: str, arguments: Any, params: Any, now: float) -> str | None:
        """The ``requestState`` of a new approval of this call; None when its first-round
        members make it larger than :data:`MAX_STATE_PAYLOAD`. ``now`` (the session clock) is
        not used: the expiry is on the wall clock, the same in every process."""
        restore = {k: params[k] for k in _MRTR_MEMBERS if isinstance(params, dict) and k in params}
        body: dict[str, Any] = {"n": secrets.token_hex(16), "e": int(self._wall() + self.ttl) + 1}
        if restore:
            body["r"] = restore
        try:
            raw = json.dumps(body, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")
        except (TypeError, ValueError, OverflowError, RecursionError):
            return None
        if len(raw) > MAX_STATE_PAYLOAD:
            return None
        payload = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        return f"{STATE_PREFIX}{_VERSION}{payload}.{self._mac(call_digest(name, arguments), payload)}"

    def redeem(self, state: Any, name: str, arguments: Any) -> Offer | None:
        """The approval a retry's state names, when it is one this gateway signed for this user,
        upstream, tool and arguments, and its nonce was not used; the nonce is then used (until
        its expiry). None otherwise, and when :data:`MAX_USED` unexpired nonces are remembered
        (fail closed: a nonce is never forgotten before it expires)."""
        m = _STATE.fullmatch(state) if state.__class__ is str else None
        if m is None:
            return None
        payload, mac = m.groups()
        digest = call_digest(name, arguments)
        if not hmac.compare_digest(mac, self._mac(digest, payload)):
            return None
        try:
            body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
            return None
        if not isinstance(body, dict):
            return None
        nonce, expires, restore = body.get("n"), body.get("e"), body.get("r", {})
        if (
            nonce.__class__ is not str
            or not _NONCE.fullmatch(nonce)
            or expires.__class__ is not int
            or not isinstance(restore, dict)
        ):
            return None
        self._prune()
        if nonce in self.used or len(self.used) >= self.limit:
            return None
        self.used[nonce] = float(expires)
        return Offer(digest, 0.0, restore, 0, float(expires))

    def expired(self, offer: Offer, now: float, timeout: float) -> bool:
        """Whether the approval's time is up (its expiry, on the wall clock)."""
        return self._wall() >= offer.expires

    def _prune(self) -> None:
        now = self._wall()
        if any(expiry <= now for expiry in self.used.values()):
            self.used = {n: e for n, e in self.used.items() if e > now}

    # -- the approvals guard's shared state (assay.policy.guards.approvals) -------------------------

    def export(self) -> Any:
        self._prune()
        return [[nonce, expiry] for nonce, expiry in self.used.items()] or None

    def restore(self, value: Any) -> None:
        if value is None:
            self.used = {}
            return
        if not isinstance(value, list) or len(value) > 4 * MAX_USED:
            raise ValueError("approvals: the used nonces are not a list")
        used: dict[str, float] = {}
        for item in value:
            if (
                not isinstance(item, list)
                or len(item) != 2
                or item[0].__class__ is not str
                or not _NONCE.fullmatch(item[0])
                or item[1].__class__ not in (int, float)
            ):
                raise ValueError("approvals: a used nonce does not read")
            used[item[0]] = float(item[1])
        self.used = used
        self._prune()
