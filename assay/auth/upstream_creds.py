"""The gateway's credentials to its upstream servers, as values (sans-IO; docs/serve.md,
"Credentials to upstreams").

Two of an upstream's credentials are tokens the gateway asks a token endpoint for: the OAuth
client-credentials grant (the gateway's own token) and the token exchange of RFC 8693 (one
token per user: the user's bearer token is the subject token, the upstream the audience).
This module builds those requests (:class:`TokenRequest`; the client authenticates with
``client_secret_basic``), reads the endpoint's answer with every check (:func:`read_token_response`:
``token_type`` Bearer, ``access_token`` a token that fits a header, ``expires_in`` a positive
number, and for an exchange ``issued_token_type`` an access token), and keeps issued tokens in a
:class:`TokenCache` bounded in entries and bytes, on a clock the caller gives.

Every failure is an :class:`UpstreamCredError`: one line naming the upstream and the step,
with the server's RFC 6749 ``error`` and ``error_description`` (printable, capped, any secret
of the request blanked), never a token or a secret.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from assay.auth.clientauth import basic_header
from assay.auth.grants import TOKEN_EXCHANGE, read_json
from assay.gateway.config import ClientCredentials, TokenExchange

__all__ = [
    "ACCESS_TOKEN_TYPE",
    "CacheKey",
    "Issued",
    "TokenCache",
    "TokenRequest",
    "UpstreamCredError",
    "client_credentials_request",
    "read_token_response",
    "token_exchange_request",
]

#: RFC 8693's token type of an OAuth access token (the subject token, and what is asked for)
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
#: the longest access token used (it goes in a header)
MAX_TOKEN = 16 * 1024
#: an answer without ``expires_in`` is kept this long (RFC 6749 only recommends the member)
DEFAULT_LIFETIME = 300.0
#: no token is kept longer than this, whatever its ``expires_in`` says
MAX_LIFETIME = 24 * 3600.0
#: a token is dropped this long (at most a tenth of its lifetime) before it expires
EARLY = 30.0
_DESCRIPTION_CAP = 200

#: (the user's session key, or "" for the gateway's own token; the upstream's name; the audience)
CacheKey = tuple[str, str, str]


class UpstreamCredError(Exception):
    """A credential to an upstream that cannot be had or was refused; ``str()`` is one line."""


@dataclass(frozen=True)
class TokenRequest:
    """One POST to a token endpoint: the form (``application/x-www-form-urlencoded``) and the
    headers (the client's id and secret in a Basic ``Authorization`` header)."""

    url: str
    form: dict[str, str] = field(repr=False)
    headers: dict[str, str] = field(repr=False)


@dataclass(frozen=True)
class Issued:
    """A token the endpoint issued and how long it may be used (seconds, capped)."""

    access_token: str = field(repr=False)
    lifetime: float


def _client(client_id: str, secret: str) -> dict[str, str]:
    return {"Authorization": basic_header(client_id, secret), "Accept": "application/json"}


def client_credentials_request(cred: ClientCredentials, client_secret: str) -> TokenRequest:
    """The client-credentials grant of ``cred`` (RFC 6749, section 4.4)."""
    form = {"grant_type": "client_credentials"}
    if cred.scope:
        form["scope"] = cred.scope
    if cred.audience:
        form["audience"] = cred.audience
    return TokenRequest(cred.token_url, form, _client(cred.client_id, client_secret))


def token_exchange_request(cred: TokenExchange, client_secret: str, subject_token: str) -> TokenRequest:
    """The token exchange of ``cred`` for the user whose bearer token is ``subject_token``
    (RFC 8693, section 2.1): an access token for the upstream's ``audience``."""
    form = {
        "grant_type": TOKEN_EXCHANGE,
        "subject_token": subject_token,
        "subject_token_type": ACCESS_TOKEN_TYPE,
        "requested_token_type": ACCESS_TOKEN_TYPE,
        "audience": cred.audience,
    }
    if cred.scope:
        form["scope"] = cred.scope
    return TokenRequest(cred.token_url, form, _client(cred.client_id, client_secret))


def _code(value: object) -> str | None:
    """RFC 6749's ``error`` as much as is safe to show (its own character set, capped)."""
    if not isinstance(value, str):
        return None
    return "".join(c for c in value[:80] if 0x20 <= ord(c) < 0x7F and c not in '"\\').strip() or None


def _description(value: object, hide: Iterable[str]) -> str | None:
    """``error_description``: one printable line, capped, with the request's secrets blanked."""
    if not isinstance(value, str):
        return None
    text = value[:4096]
    for secret in hide:
        if len(secret) >= 4:
            text = text.replace(secret, "[hidden]")
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if len(text) > _DESCRIPTION_CAP:
        text = text[: _DESCRIPTION_CAP - 3] + "..."
    return text or None


def _token(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_TOKEN and all(0x20 < ord(c) < 0x7F for c in value)


def _lifetime(value: object) -> float | None:
    """``expires_in`` as seconds, None when it is not a positive number (a string of digits,
    which some servers send, counts)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 10:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        return None
    return min(seconds, MAX_LIFETIME)


def read_token_response(
    status: int, body: bytes | None, *, what: str, exchange: bool, hide: Iterable[str] = ()
) -> Issued:
    """The token in a token endpoint's answer to ``what`` ("the token exchange for upstream
    docs"); ``body`` None: the answer was longer than the cap. ``exchange``: an RFC 8693 answer,
    whose ``issued_token_type`` must be an access token. ``hide``: the request's secrets (the
    client secret, the subject token), blanked in anything shown. Raises
    :class:`UpstreamCredError` and nothing else."""
    if body is None:
        raise UpstreamCredError(f"the token endpoint's answer to {what} is too long (HTTP {status})")
    doc = read_json(body)
    if status != 200:
        reason = f"HTTP {status}"
        if isinstance(doc, dict):
            code = _code(doc.get("error"))
            if code:
                reason += f", {code}"
            described = _description(doc.get("error_description"), list(hide))
            if described:
                reason += f": {described}"
        raise UpstreamCredError(f"the token endpoint refused {what} ({reason})")
    if not isinstance(doc, dict):
        raise UpstreamCredError(f"the token endpoint's answer to {what} is not a JSON object")
    if not _token(doc.get("access_token")):
        raise UpstreamCredError(f"the token endpoint's answer to {what} holds no usable access_token")
    kind = doc.get("token_type")
    if not isinstance(kind, str) or kind.lower() != "bearer":
        shown = _code(kind) if isinstance(kind, str) else type(kind).__name__
        raise UpstreamCredError(f"the token endpoint's answer to {what} is not a Bearer token (token_type {shown})")
    if exchange and doc.get("issued_token_type") != ACCESS_TOKEN_TYPE:
        raise UpstreamCredError(
            f"the token endpoint's answer to {what} is not an access token (issued_token_type must be {ACCESS_TOKEN_TYPE})"
        )
    lifetime = DEFAULT_LIFETIME
    if "expires_in" in doc:
        given = _lifetime(doc["expires_in"])
        if given is None:
            raise UpstreamCredError(
                f"the token endpoint's answer to {what} holds an unusable expires_in (not a positive number)"
            )
        lifetime = given
    return Issued(doc["access_token"], lifetime)


@dataclass
class _Entry:
    token: str
    expires: float
    size: int


class TokenCache:
    """Issued tokens by :data:`CacheKey`, each until shortly before it expires (by ``now``, a
    monotonic clock in seconds), at most ``max_entries`` of them and ``max_bytes`` in all: past
    either, expired entries go first, then the least recently used."""

    def __init__(self, *, now: Callable[[], float], max_entries: int = 4096, max_bytes: int = 8 * 1024 * 1024) -> None:
        if max_entries <= 0 or max_bytes <= 0:
            raise ValueError("the token cache needs room for at least one entry")
        self.now = now
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[CacheKey, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: CacheKey) -> str | None:
        """The token kept for ``key``, None when there is none or it is (nearly) expired."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self.now() >= entry.expires:
            self._remove(key)
            return None
        self._entries.move_to_end(key)
        return entry.token

    def put(self, key: CacheKey, token: str, lifetime: float) -> None:
        """Keep ``token`` for ``key`` for ``lifetime`` seconds less a margin (a tenth of it, at
        most :data:`EARLY`); a token larger than the whole cache is not kept."""
        self.drop(key)
        size = _size(key, token)
        if size > self.max_bytes:
            return
        expires = self.now() + lifetime - min(EARLY, lifetime / 10)
        self._entries[key] = _Entry(token, expires, size)
        self.bytes += size
        if len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            self._shrink()

    def drop(self, key: CacheKey, token: str | None = None) -> None:
        """Forget ``key``'s token (only when it is still ``token``, if given: a token refused
        by the upstream, while another task may already have put a fresh one)."""
        entry = self._entries.get(key)
        if entry is not None and (token is None or entry.token == token):
            self._remove(key)

    def _remove(self, key: CacheKey) -> None:
        entry = self._entries.pop(key)
        self.bytes -= entry.size

    def _shrink(self) -> None:
        now = self.now()
        for key in [k for k, e in self._entries.items() if now >= e.expires]:
            self._remove(key)
        while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            self._remove(next(iter(self._entries)))


def _size(key: CacheKey, token: str) -> int:
    """An entry's bytes as counted against ``max_bytes``: its strings and a fixed overhead."""
    return 64 + len(token) + sum(len(part.encode("utf-8", "surrogatepass")) for part in key)
