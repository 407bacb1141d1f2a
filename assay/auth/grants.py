"""The requests of the flows, as values, and the answers read (sans-IO; docs/auth.md).

PKCE (S256, from entropy the caller gives), the authorization URL, the authorization response
checked (``state``, and ``iss`` as RFC 9207 says), every token request as a form (authorization
code, refresh, client credentials, the JWT bearer grant, the token exchange for an ID-JAG), the
dynamic registration's body, and the token response read into :class:`Tokens` or a
:class:`GrantError` whose text is one line naming the server's error code, never its token.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from assay.auth.discovery import Server
from assay.terminal import printable

__all__ = [
    "CLIENT_NAME",
    "ID_JAG",
    "ID_JAG_PROFILE",
    "ID_TOKEN",
    "JWT_BEARER",
    "TOKEN_EXCHANGE",
    "GrantError",
    "Pkce",
    "Tokens",
    "authorization_url",
    "check_callback",
    "read_json",
    "read_tokens",
    "registration_body",
]

CLIENT_NAME = "assay"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_PROFILE = "urn:ietf:params:oauth:grant-profile:id-jag"
MAX_TOKEN = 16384
MAX_LIFETIME = 10 * 365 * 86400


class GrantError(Exception):
    """A grant that did not work; ``str()`` is one line. ``code`` is the server's ``error``."""

    def __init__(self, text: str, code: str | None = None, reason: str | None = None) -> None:
        super().__init__(text)
        self.code = code
        self.reason = reason or text  # the short form: "HTTP 400, invalid_grant"


@dataclass(frozen=True)
class Pkce:
    verifier: str
    challenge: str

    @classmethod
    def from_entropy(cls, entropy: bytes) -> Pkce:
        """From 32 to 96 random bytes: a verifier of 43 to 128 characters and its S256 challenge."""
        if not 32 <= len(entropy) <= 96:
            raise ValueError("PKCE needs 32 to 96 random bytes")
        verifier = base64.urlsafe_b64encode(entropy).decode("ascii").rstrip("=")
        digest = hashlib.sha256(verifier.encode("ascii")).digest()
        return cls(verifier, base64.urlsafe_b64encode(digest).decode("ascii").rstrip("="))


def authorization_url(
    server: Server, *, client_id: str, redirect_uri: str, scope: str | None, state: str, pkce: Pkce, resource: str
) -> str:
    """The URL the browser opens. The server must offer PKCE with S256."""
    if server.authorization_endpoint is None:
        raise GrantError(f"the authorization server {server.issuer} names no authorization endpoint")
    if server.pkce_methods is None or "S256" not in server.pkce_methods:
        raise GrantError(
            f"the authorization server {server.issuer} does not say it supports PKCE with S256; "
            "assay does not log in without it"
        )
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": pkce.challenge,
        "code_challenge_method": "S256",
        "resource": resource,
    }
    if scope:
        params["scope"] = scope
    parts = urlsplit(server.authorization_endpoint)
    query = "&".join(q for q in (parts.query, urlencode(params)) if q)
    return parts._replace(query=query, fragment="").geturl()


def check_callback(query: dict[str, str], server: Server) -> str:
    """The code of an authorization response whose ``state`` was already checked; GrantError
    for a response of another issuer (RFC 9207: a present ``iss`` must be the issuer, an absent
    one is refused where the server says it sends it), or a refusal."""
    iss = query.get("iss")
    if iss is not None and iss != server.issuer:
        raise GrantError(
            f"the authorization response came from another issuer ({printable(iss[:200])}); it was not used"
        )
    if iss is None and server.iss_parameter:
        raise GrantError("the authorization response lacks the issuer its server says it sends; it was not used")
    if "error" in query or not query.get("code"):
        code = _code(query.get("error")) or "no code"
        raise GrantError(f"the authorization server refused the login ({code})", code)
    return query["code"]


def registration_body(*, redirect_uris: list[str], scope: str | None, method: str) -> dict[str, Any]:
    """A dynamic registration's request: a native client, the code and refresh grants."""
    body: dict[str, Any] = {
        "client_name": CLIENT_NAME,
        "redirect_uris": redirect_uris,
        "application_type": "native",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
    }
    if scope:
        body["scope"] = scope
    return body


def _code(value: object) -> str | None:
    """A server's ``error`` code, as much as is safe to show."""
    if not isinstance(value, str) or not value:
        return None
    return "".join(c for c in value[:80] if 0x20 < ord(c) < 0x7F) or None


def read_json(body: bytes) -> Any:
    """A JSON document, or None when ``body`` is not one."""
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def _vschar(value: object, cap: int = MAX_TOKEN) -> bool:
    return isinstance(value, str) and 0 < len(value) <= cap and all(0x20 < ord(c) < 0x7F for c in value)


@dataclass(frozen=True)
class Tokens:
    access_token: str
    token_type: str
    refresh_token: str | None
    scope: str | None
    expires_in: int | None

    def as_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"access_token": self.access_token, "token_type": self.token_type}
        for key in ("refresh_token", "scope", "expires_in"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def read_tokens(
    status: int, body: bytes, *, what: str, asked_scope: str | None, issued_type: str | None = None
) -> Tokens:
    """A token endpoint's answer to the request ``what`` ("the refresh", ...). ``issued_type``
    is the token type a token exchange must have issued (its token is then no bearer token)."""
    doc = read_json(body)
    if status != 200:
        code = _code(doc.get("error")) if isinstance(doc, dict) else None
        reason = f"HTTP {status}" + (f", {code}" if code else "")
        raise GrantError(f"the authorization server refused {what} ({reason})", code, reason)
    if not isinstance(doc, dict):
        raise GrantError(f"the authorization server's answer to {what} is not a JSON object")
    if not _vschar(doc.get("access_token")):
        raise GrantError(f"the authorization server's answer to {what} holds no usable access token")
    kind = doc.get("token_type")
    if issued_type is not None:
        if doc.get("issued_token_type") != issued_type:
            raise GrantError(f"the authorization server's answer to {what} is not a {issued_type}")
    elif not isinstance(kind, str) or kind.lower() != "bearer":
        raise GrantError(
            f"the authorization server's answer to {what} is not a bearer token ({printable(str(kind)[:40])})"
        )
    refresh = doc.get("refresh_token")
    if refresh is not None and not _vschar(refresh):
        raise GrantError(f"the authorization server's answer to {what} holds an unusable refresh token")
    scope = doc.get("scope")
    if scope is not None and not (isinstance(scope, str) and len(scope) <= 4096 and scope.isprintable()):
        raise GrantError(f"the authorization server's answer to {what} holds an unusable scope")
    lifetime = doc.get("expires_in")
    if isinstance(lifetime, str) and lifetime.isdigit() and len(lifetime) < 12:
        lifetime = int(lifetime)
    if lifetime is not None and (isinstance(lifetime, bool) or not isinstance(lifetime, int) or lifetime < 0):
        raise GrantError(f"the authorization server's answer to {what} holds an unusable expires_in")
    return Tokens(
        doc["access_token"],
        "Bearer" if issued_type is None else str(kind),
        refresh,
        scope if scope is not None else asked_scope,
        None if lifetime is None else min(lifetime, MAX_LIFETIME),
    )
