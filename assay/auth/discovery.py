"""The discovery documents (sans-IO; docs/auth.md, "Discovery"): where the protected-resource
metadata and the authorization-server metadata are looked for, what makes them valid, and the
scope a login asks for.

Every check is made on the decoded JSON before anything is used; a document that fails one is
a :class:`DiscoveryError` (one line). An endpoint is an absolute ``https://`` URL, or
``http://`` to a loopback host where the server naming it is itself on this machine (a remote
server cannot send wrap to a service of this machine); the metadata's ``issuer`` must be exactly
the issuer it was looked up for (a root issuer with or without its trailing slash counts as the
same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from assay.shells.upstream_http.target import is_loopback
from assay.terminal import printable

__all__ = [
    "OFFLINE_ACCESS",
    "DiscoveryError",
    "is_local",
    "Resource",
    "Server",
    "as_urls",
    "canonical_resource",
    "check_resource",
    "check_server",
    "endpoint_ok",
    "issuers_match",
    "prm_urls",
    "resource_allowed",
    "select_scope",
    "union_scopes",
]

OFFLINE_ACCESS = "offline_access"
MAX_URL = 2048
MAX_ITEMS = 256
_DEFAULT_PORTS = {"http": 80, "https": 443}


class DiscoveryError(Exception):
    """A discovery document that cannot be used; ``str()`` is one line."""


def _shown(text: object) -> str:
    return printable(str(text)[:200])


def is_local(url: str) -> bool:
    """Whether ``url``'s host is loopback."""
    try:
        return is_loopback(urlsplit(url).hostname or "")
    except ValueError:
        return False


def endpoint_ok(url: object, *, local: bool = True) -> bool:
    """An absolute https URL, or (``local``: for a server on this machine) http to a loopback
    host; no user information, no fragment."""
    if not isinstance(url, str) or len(url) > MAX_URL or not url.isprintable() or any(c.isspace() for c in url):
        return False
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018  (a bad port raises here)
    except ValueError:
        return False
    if not host or parts.username is not None or parts.password is not None or parts.fragment:
        return False
    return parts.scheme == "https" or (local and parts.scheme == "http" and is_loopback(host))


def canonical_resource(url: str) -> str:
    """The resource indicator of a server URL: scheme and host lower-cased, a default port,
    the query and the fragment dropped."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path, "", ""))


def resource_allowed(server: str, resource: str) -> bool:
    """Whether a protected-resource ``resource`` may stand for the server URL ``server``: the same
    origin, and its path the server's or a parent of it (whole segments)."""
    try:
        a, b = urlsplit(canonical_resource(server)), urlsplit(canonical_resource(resource))
    except ValueError:
        return False
    if (a.scheme, a.netloc) != (b.scheme, b.netloc):
        return False
    mine, theirs = a.path.rstrip("/"), b.path.rstrip("/")
    return mine == theirs or mine.startswith(theirs + "/")


def issuers_match(a: str, b: str) -> bool:
    """Simple string comparison of issuer identifiers, except that ``scheme://host`` and
    ``scheme://host/`` name the same server."""
    if a == b:
        return True
    shorter, longer = sorted((a, b), key=len)
    parts = urlsplit(shorter)
    return longer == shorter + "/" and shorter == f"{parts.scheme}://{parts.netloc}"


def prm_urls(server_url: str, resource_metadata: str | None) -> list[str]:
    """Where the protected-resource metadata is looked for, in order: the challenge's
    ``resource_metadata``, then the well-known URL with the server's path, then the root one."""
    parts = urlsplit(server_url)
    base = f"{parts.scheme}://{parts.netloc}"
    urls = (
        [resource_metadata] if resource_metadata and endpoint_ok(resource_metadata, local=is_local(server_url)) else []
    )
    if parts.path and parts.path != "/":
        urls.append(f"{base}/.well-known/oauth-protected-resource{parts.path}")
    urls.append(f"{base}/.well-known/oauth-protected-resource")
    return list(dict.fromkeys(urls))


def as_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata is looked for, in order (OAuth metadata, then OpenID
    discovery, the issuer's path inserted after the well-known prefix and then appended)."""
    parts = urlsplit(issuer)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if path:
        return [
            f"{base}/.well-known/oauth-authorization-server{path}",
            f"{base}/.well-known/openid-configuration{path}",
            f"{base}{path}/.well-known/openid-configuration",
        ]
    return [f"{base}/.well-known/oauth-authorization-server", f"{base}/.well-known/openid-configuration"]


def _strings(doc: dict[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    value = doc.get(key)
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) > MAX_ITEMS
        or not all(isinstance(v, str) and 0 < len(v) <= MAX_URL for v in value)
    ):
        raise DiscoveryError(f"{where}: {key} is not a list of strings")
    return tuple(value)


@dataclass(frozen=True)
class Resource:
    """Checked protected-resource metadata."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None
    doc: dict[str, Any]


def check_resource(doc: Any, server_url: str, where: str) -> Resource:
    """The protected-resource metadata ``doc`` (fetched from ``where``) for ``server_url``."""
    if not isinstance(doc, dict):
        raise DiscoveryError(f"the protected-resource metadata at {_shown(where)} is not a JSON object")
    local = is_local(server_url)
    resource = doc.get("resource")
    if not isinstance(resource, str) or not endpoint_ok(resource, local=local):
        raise DiscoveryError(f"the protected-resource metadata at {_shown(where)} names no valid resource")
    if not resource_allowed(server_url, resource):
        raise DiscoveryError(
            f"the protected-resource metadata at {_shown(where)} is for another resource ({_shown(resource)})"
        )
    servers = _strings(doc, "authorization_servers", f"the protected-resource metadata at {_shown(where)}") or ()
    if not servers:
        raise DiscoveryError(f"the protected-resource metadata at {_shown(where)} names no authorization server")
    for issuer in servers:
        if not endpoint_ok(issuer, local=local) or urlsplit(issuer).query:
            raise DiscoveryError(
                f"the protected-resource metadata at {_shown(where)} names an authorization "
                f"server that is not an https URL ({_shown(issuer)})"
            )
    scopes = _strings(doc, "scopes_supported", f"the protected-resource metadata at {_shown(where)}")
    return Resource(resource, servers, scopes, doc)


@dataclass(frozen=True)
class Server:
    """Checked authorization-server metadata (the members the flows read)."""

    issuer: str
    token_endpoint: str
    authorization_endpoint: str | None
    registration_endpoint: str | None
    scopes_supported: tuple[str, ...] | None
    auth_methods: tuple[str, ...] | None  # None: the default, client_secret_basic alone
    signing_algs: tuple[str, ...] | None
    pkce_methods: tuple[str, ...] | None
    grant_types: tuple[str, ...] | None
    grant_profiles: tuple[str, ...] | None
    iss_parameter: bool
    metadata_documents: bool  # client_id_metadata_document_supported
    doc: dict[str, Any]


def check_server(doc: Any, issuer: str, where: str) -> Server:
    """The authorization-server metadata ``doc`` (fetched from ``where``) of ``issuer``."""
    name = f"the authorization-server metadata at {_shown(where)}"
    if not isinstance(doc, dict):
        raise DiscoveryError(f"{name} is not a JSON object")
    found = doc.get("issuer")
    if not isinstance(found, str) or not issuers_match(found, issuer):
        raise DiscoveryError(f"{name} names another issuer ({_shown(found)}, not {_shown(issuer)})")
    endpoints: dict[str, str | None] = {}
    for key in ("token_endpoint", "authorization_endpoint", "registration_endpoint"):
        value = doc.get(key)
        if value is not None and not endpoint_ok(value, local=is_local(issuer)):
            raise DiscoveryError(f"{name}: {key} is not an https URL ({_shown(value)})")
        endpoints[key] = value
    token_endpoint = endpoints["token_endpoint"]
    if token_endpoint is None:
        raise DiscoveryError(f"{name} names no token endpoint")
    flag = doc.get("authorization_response_iss_parameter_supported")
    documents = doc.get("client_id_metadata_document_supported")
    return Server(  # the issuer as the server writes it: an authorization response's iss is compared to it
        issuer=found,
        token_endpoint=token_endpoint,
        authorization_endpoint=endpoints["authorization_endpoint"],
        registration_endpoint=endpoints["registration_endpoint"],
        scopes_supported=_strings(doc, "scopes_supported", name),
        auth_methods=_strings(doc, "token_endpoint_auth_methods_supported", name),
        signing_algs=_strings(doc, "token_endpoint_auth_signing_alg_values_supported", name),
        pkce_methods=_strings(doc, "code_challenge_methods_supported", name),
        grant_types=_strings(doc, "grant_types_supported", name),
        grant_profiles=_strings(doc, "authorization_grant_profiles_supported", name),
        iss_parameter=flag is True,
        metadata_documents=documents is True,
        doc=doc,
    )


def union_scopes(first: str | None, second: str | None) -> str | None:
    """Both scope lists, in order, each scope once; None when both are empty."""
    seen = list(dict.fromkeys((first or "").split() + (second or "").split()))
    return " ".join(seen) or None


def select_scope(
    challenged: str | None,
    resource: Resource | None,
    server: Server | None,
    *,
    asked: str | None = None,
    refresh: bool = True,
) -> str | None:
    """The scope a login asks for: the challenge's, else the resource's ``scopes_supported``
    (else none), with ``asked`` (``--scope``) added; ``offline_access`` added when the server
    lists it and the client uses refresh tokens (unless no scope is asked for at all: the
    server's default then), and dropped when the server does not list it."""
    if challenged:
        scope = challenged
    elif resource is not None and resource.scopes_supported:
        scope = " ".join(resource.scopes_supported)
    else:
        scope = None
    scope = union_scopes(scope, asked)
    listed = server is not None and server.scopes_supported is not None and OFFLINE_ACCESS in server.scopes_supported
    words = [w for w in (scope or "").split() if w != OFFLINE_ACCESS or listed]
    if listed and refresh and words and OFFLINE_ACCESS not in words:  # no scope at all: the server's default
        words.append(OFFLINE_ACCESS)
    return " ".join(words) or None
