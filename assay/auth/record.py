"""A stored login and what binds it (sans-IO; docs/auth.md, "Where tokens live", "The
authorization server a login belongs to").

A record (the JSON of :mod:`assay.shells.upstream_http.tokens`) holds the tokens, the client registration and
the authorization-server metadata of ONE issuer, named by its ``issuer`` member: every stored
credential (client id and secret, refresh and access tokens, the sources of a secret or a key)
belongs to that server and is sent to no other. :func:`read` checks a record and gives a
:class:`Stored`; :func:`check_binding` refuses protected-resource metadata that no longer names
the issuer, before anything is sent. A record written before the binding existed is bound to
the issuer of the metadata it recorded (the server its tokens came from).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from assay.auth.discovery import DiscoveryError, Resource, Server, check_resource, check_server, issuers_match

__all__ = [
    "EARLY",
    "AUTHORIZATION_CODE",
    "CLIENT_CREDENTIALS",
    "ID_JAG_GRANT",
    "IssuerChanged",
    "RecordError",
    "Stored",
    "check_binding",
    "read",
]

EARLY = 30.0  # seconds before its expiry a token is renewed
AUTHORIZATION_CODE = "authorization_code"
CLIENT_CREDENTIALS = "client_credentials"
ID_JAG_GRANT = "id_jag"
_KINDS = (AUTHORIZATION_CODE, CLIENT_CREDENTIALS, ID_JAG_GRANT)


class RecordError(Exception):
    """A record that cannot be used; ``str()`` is one line (without the fix: the caller adds it)."""


class IssuerChanged(Exception):
    """The resource now names other authorization servers than the one a login belongs to."""

    def __init__(self, issuer: str, named: tuple[str, ...]) -> None:
        super().__init__(f"it now names {', '.join(named)[:300]}, not {issuer}")
        self.issuer = issuer
        self.named = named


@dataclass
class Stored:
    url: str
    issuer: str
    server: Server
    resource: str
    grant: dict[str, Any]
    client: dict[str, Any] = field(default_factory=dict)
    tokens: dict[str, Any] | None = None
    expires_at: float | None = None
    resource_doc: dict[str, Any] | None = None

    @property
    def kind(self) -> str:
        return str(self.grant.get("kind", AUTHORIZATION_CODE))

    def token(self, now: float) -> str | None:
        """The access token, unless it expires within :data:`EARLY` seconds (or there is none)."""
        if not self.tokens:
            return None
        if self.expires_at is not None and now >= self.expires_at - EARLY:
            return None
        return str(self.tokens["access_token"])

    @property
    def access_token(self) -> str | None:
        return None if not self.tokens else str(self.tokens["access_token"])

    @property
    def refresh_token(self) -> str | None:
        value = (self.tokens or {}).get("refresh_token")
        return value if isinstance(value, str) and value else None

    @property
    def scope(self) -> str | None:
        value = (self.tokens or {}).get("scope")
        return value if isinstance(value, str) and value else None

    def as_record(self) -> dict[str, Any]:
        """The record to store (the store adds ``version`` and ``saved``)."""
        return {
            "url": self.url,
            "issuer": self.issuer,
            "resource": self.resource,
            "grant": self.grant,
            "client_info": self.client or None,
            "tokens": self.tokens,
            "expires_at": self.expires_at,
            "oauth_metadata": self.server.doc,
            "resource_metadata": self.resource_doc,
        }


def read(record: dict[str, Any], url: str) -> Stored:
    """The checked :class:`Stored` of a record already read as a token record (its shape)."""
    metadata = record.get("oauth_metadata")
    issuer = record.get("issuer")
    if issuer is None and isinstance(metadata, dict):  # written before the binding: its tokens' server
        issuer = metadata.get("issuer")
    if not isinstance(issuer, str) or not isinstance(metadata, dict):
        raise RecordError("it does not say which authorization server it belongs to")
    try:
        server = check_server(metadata, issuer, "the token file")
    except DiscoveryError as exc:
        raise RecordError(f"its authorization-server metadata cannot be used ({exc})") from None
    tokens = record.get("tokens")
    if tokens is not None:
        for key in ("access_token", "refresh_token"):
            value = tokens.get(key)
            if value is not None and not _vschar(value):
                raise RecordError(f"its {key.replace('_', ' ')} is not a token")
    expires_at = record.get("expires_at")
    if expires_at is not None and not math.isfinite(expires_at):
        raise RecordError("its expiry is not a time")
    grant = dict(record.get("grant") or {"kind": AUTHORIZATION_CODE})
    if grant.get("kind", AUTHORIZATION_CODE) not in _KINDS:
        raise RecordError("its grant is not one assay knows")
    client = dict(record.get("client_info") or {})
    if client and not (isinstance(client.get("client_id"), str) and client["client_id"]):
        raise RecordError("its client registration has no client id")
    resource = record.get("resource")
    if not isinstance(resource, str) or not resource:
        from assay.auth.discovery import canonical_resource

        prm = record.get("resource_metadata")
        resource = prm.get("resource") if isinstance(prm, dict) and isinstance(prm.get("resource"), str) else None
        resource = resource or canonical_resource(url)
    return Stored(
        url=url,
        issuer=server.issuer,
        server=server,
        resource=resource,
        grant=grant,
        client=client,
        tokens=tokens,
        expires_at=expires_at,
        resource_doc=record.get("resource_metadata"),
    )


def _vschar(value: object) -> bool:
    """A token as it may go into a header or a form: printable ASCII without spaces."""
    return isinstance(value, str) and 0 < len(value) <= 16384 and all(0x20 < ord(c) < 0x7F for c in value)


def check_binding(stored: Stored, resource: Resource) -> None:
    """Raise :class:`IssuerChanged` unless ``resource`` still names the issuer ``stored``
    belongs to (the other servers it may name are never asked anything)."""
    if not any(issuers_match(stored.issuer, named) for named in resource.authorization_servers):
        raise IssuerChanged(stored.issuer, resource.authorization_servers)


def resource_of(doc: Any, url: str) -> Resource | None:
    """A stored protected-resource document, checked again (None when it is not usable)."""
    try:
        return check_resource(doc, url, "the token file")
    except DiscoveryError:
        return None
