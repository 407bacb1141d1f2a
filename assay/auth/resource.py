"""`assay mcp serve` as an OAuth 2.1 resource server (docs/serve.md, "Identity"). Sans-IO: a
bearer token and the issuer's keys in, an :class:`~assay.gateway.contract.Identity` or an
:class:`~assay.gateway.contract.AuthFailure` out; the clock is the caller's.

A token is accepted when all of these hold, checked in this order:

- the ``Authorization`` header is ``Bearer <token>`` (the scheme in any case) and the token is a
  JWS in compact form, at most :data:`MAX_TOKEN_BYTES`, whose header is a JSON object;
- its ``alg`` is one of the configured algorithms, and those are asymmetric signatures only
  (:data:`ASYMMETRIC`): never ``none``, never an HMAC (an ``HS256`` token "signed" with the
  issuer's public key is refused before any key is looked at); no ``crit`` member;
- a key of the issuer's set with the token's ``kid`` (any key of the set for a token without
  one), of the algorithm's key type and, where the key names one, of that algorithm, verifies
  the signature;
- ``iss`` is the configured issuer exactly; ``aud`` (a string or a list) holds the resource;
  ``exp`` is present and not past, ``nbf`` (when present) not in the future, both with the
  configured leeway; ``sub`` is a non-empty string;
- the token's scopes (``scope``, space-separated; else ``scp``, a list or a space-separated
  string) hold every configured scope, else 403 ``insufficient_scope``.

A refusal's reason names what failed, never the token nor anything read from it.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from joserfc import jwt
from joserfc.jwk import ECKey, OKPKey, RSAKey

from assay.auth.jwks import PublicKey
from assay.gateway.config import OAuthIdentity
from assay.gateway.configfile import is_loopback
from assay.gateway.contract import AuthFailure, Identity
from assay.strictjson import StrictJSONError, finite_float, refuse_constant, unique_pairs

__all__ = [
    "ASYMMETRIC",
    "MAX_TOKEN_BYTES",
    "METADATA_PREFIX",
    "Challenger",
    "Header",
    "TokenVerifier",
    "bearer_token",
    "looks_like_jwt",
    "metadata_url",
    "oauth_problems",
    "resource_metadata",
]

#: The signature algorithms a token may use: public-key signatures only.
ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"}
)
_KEY_TYPE: dict[str, type[PublicKey]] = {
    **{alg: RSAKey for alg in ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")},
    **{alg: ECKey for alg in ("ES256", "ES384", "ES512")},
    "EdDSA": OKPKey,
    "Ed25519": OKPKey,
}
_CURVE = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521", "Ed25519": "Ed25519"}
MAX_TOKEN_BYTES = 16 * 1024
METADATA_PREFIX = "/.well-known/oauth-protected-resource"
_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +([A-Za-z0-9\-._~+/]+=*) *")
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
#: RFC 6749 scope-token: printable ASCII but space, ``"`` and ``\``
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


# -- the resource and its metadata (RFC 9728) -------------------------------------------------


def metadata_url(resource: str) -> str:
    """Where the protected-resource metadata of ``resource`` is (RFC 9728, section 3.1): the well-known
    path inserted between the host and the resource's path."""
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, METADATA_PREFIX + path, "", ""))


def resource_metadata(oauth: OAuthIdentity) -> dict[str, Any]:
    """The protected-resource metadata document (RFC 9728, section 2)."""
    doc: dict[str, Any] = {
        "resource": oauth.audience,
        "authorization_servers": list(oauth.authorization_servers or (oauth.issuer,)),
        "bearer_methods_supported": ["header"],
    }
    if oauth.scopes:
        doc["scopes_supported"] = list(oauth.scopes)
    return doc


def _url_problem(what: str, value: str) -> str | None:
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        return f"{what}: not a URL"
    if parts.scheme == "https" or (parts.scheme == "http" and host is not None and is_loopback(host)):
        if not host:
            return f"{what}: the URL has no host"
        if parts.fragment or "#" in value:
            return f"{what}: the URL has a fragment"
        if '"' in value or "\\" in value or any(ord(c) < 0x21 or ord(c) > 0x7E for c in value):
            return f"{what}: the URL has characters that need escaping"
        return None
    return f"{what}: must be an https URL (http only on a loopback host)"


def oauth_problems(oauth: OAuthIdentity) -> list[str]:
    """What is wrong with an ``oauth`` section, one line each (none: it can be served)."""
    problems = []
    for what, value in (("identity.oauth.issuer", oauth.issuer), ("identity.oauth.jwks_url", oauth.jwks_url)):
        problem = _url_problem(what, value)
        if problem:
            problems.append(problem)
    problem = _url_problem("identity.oauth.audience", oauth.audience)
    if problem:
        problems.append(problem)
    elif urlsplit(oauth.audience).query:
        problems.append("identity.oauth.audience: the resource URL has a query")
    for server in oauth.authorization_servers:
        problem = _url_problem("identity.oauth.authorization_servers", server)
        if problem:
            problems.append(problem)
    if not oauth.algorithms:
        problems.append("identity.oauth.algorithms: at least one algorithm is needed")
    for alg in oauth.algorithms:
        if alg not in ASYMMETRIC:
            problems.append(
                f"identity.oauth.algorithms: {alg!r} is not allowed (public-key signatures only: {', '.join(sorted(ASYMMETRIC))})"
            )
    for scope in oauth.scopes:
        if not _SCOPE_TOKEN.fullmatch(scope):
            problems.append(f"identity.oauth.scopes: {scope!r} is not a scope token")
    if not (isinstance(oauth.leeway_s, (int, float)) and 0 <= oauth.leeway_s <= 600):
        problems.append("identity.oauth.leeway: must be between 0 and 10 minutes")
    return problems


# -- the challenges -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Challenger:
    """The ``WWW-Authenticate`` values of refusals (RFC 6750, section 3, RFC 9728, section 5.1)."""

    #: the protected-resource metadata's URL (None: no OAuth, API keys only)
    metadata_url: str | None = None
    scopes: tuple[str, ...] = ()

    def _params(self) -> list[str]:
        params = []
        if self.metadata_url is not None:
            params.append(f'resource_metadata="{self.metadata_url}"')
        else:
            params.append('realm="assay"')
        if self.scopes:
            params.append(f'scope="{" ".join(self.scopes)}"')
        return params

    def unauthenticated(self, reason: str) -> AuthFailure:
        """No bearer token was given: 401 without an error code."""
        return AuthFailure(401, "Bearer " + ", ".join(self._params()), reason)

    def invalid(self, reason: str) -> AuthFailure:
        """A token was given and is not accepted: 401 ``invalid_token``."""
        return AuthFailure(401, "Bearer " + ", ".join(['error="invalid_token"', *self._params()]), reason)

    def insufficient(self, reason: str) -> AuthFailure:
        """A valid token without a needed scope: 403 ``insufficient_scope``."""
        return AuthFailure(403, "Bearer " + ", ".join(['error="insufficient_scope"', *self._params()]), reason)


def bearer_token(authorization: str | None, challenger: Challenger) -> str:
    """The token of a ``Bearer`` ``Authorization`` header, else an :class:`AuthFailure`."""
    if authorization is None or not authorization.strip():
        raise challenger.unauthenticated("no bearer token")
    found = _BEARER.fullmatch(authorization)
    if found is None:
        if authorization.split(" ", 1)[0].lower() != "bearer":
            raise challenger.unauthenticated("the Authorization header is not a Bearer token")
        raise challenger.invalid("the bearer token is malformed")
    return found.group(1)


def looks_like_jwt(token: str) -> bool:
    """A token of three dot-separated parts goes to OAuth; any other to the API keys."""
    return token.count(".") == 2


# -- the token ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Header:
    """What the token's header says (read before any key is looked at)."""

    alg: str
    kid: str | None


def _b64json(segment: str) -> Any:
    if not _B64URL.fullmatch(segment):
        raise ValueError("not base64url")
    raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    return json.loads(
        raw.decode("utf-8"), object_pairs_hook=unique_pairs, parse_constant=refuse_constant, parse_float=finite_float
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def token_scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """The scopes a token grants: ``scope`` (space-separated), else ``scp`` (a list, or a
    space-separated string); anything else grants none."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return frozenset(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, str):
        return frozenset(scp.split())
    if isinstance(scp, list):
        return frozenset(item for item in scp if isinstance(item, str) and item)
    return frozenset()


class TokenVerifier:
    """Checks bearer JWTs of one issuer for one resource."""

    def __init__(self, oauth: OAuthIdentity, challenger: Challenger | None = None) -> None:
        self.oauth = oauth
        self.algorithms = frozenset(oauth.algorithms) & ASYMMETRIC
        self.challenger = challenger or Challenger(metadata_url(oauth.audience), oauth.scopes)

    def header(self, token: str) -> Header:
        """The token's header, checked: a refusal before any key is looked at."""
        if len(token) > MAX_TOKEN_BYTES:
            raise self.challenger.invalid("the token is too long")
        parts = token.split(".")
        if len(parts) != 3:
            raise self.challenger.invalid("the token is not a JWT")
        try:
            header = _b64json(parts[0])
        except (ValueError, binascii.Error, UnicodeDecodeError, StrictJSONError, RecursionError):
            raise self.challenger.invalid("the token's header is not base64url JSON") from None
        if not isinstance(header, dict):
            raise self.challenger.invalid("the token's header is not a JSON object")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise self.challenger.invalid(f"the token's algorithm is not one of {', '.join(sorted(self.algorithms))}")
        if "crit" in header:
            raise self.challenger.invalid("the token's header has critical extensions")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise self.challenger.invalid("the token's key id is not a string")
        return Header(alg, kid)

    def _fits(self, key: PublicKey, alg: str) -> bool:
        if not isinstance(key, _KEY_TYPE[alg]):
            return False
        if key.alg is not None and key.alg != alg:
            return False
        curve = _CURVE.get(alg)
        if isinstance(key, RSAKey) or curve is None:
            return True
        return key.curve_name == curve

    def verify(self, token: str, header: Header, keys: Sequence[PublicKey], now: float) -> Identity:
        """The identity of a token whose header :meth:`header` read, given the issuer's keys
        for its ``kid`` (none: refused as signed by an unknown key)."""
        candidates = [key for key in keys if self._fits(key, header.alg)]
        if not candidates:
            raise self.challenger.invalid("no key of the issuer matches the token")
        claims: dict[str, Any] | None = None
        for key in candidates:
            try:
                decoded = jwt.decode(token, key, algorithms=[header.alg])
            except Exception:  # noqa: BLE001 - every failure of the library is a refusal
                continue
            claims = dict(decoded.claims)
            break
        if claims is None:
            raise self.challenger.invalid("the token's signature does not verify")
        return self._identity(token, claims, now)

    def _identity(self, token: str, claims: dict[str, Any], now: float) -> Identity:
        oauth = self.oauth
        if claims.get("iss") != oauth.issuer:
            raise self.challenger.invalid(f"the token is not from the issuer {oauth.issuer}")
        aud = claims.get("aud")
        audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if oauth.audience not in [item for item in audiences if isinstance(item, str)]:
            raise self.challenger.invalid(f"the token's audience does not hold {oauth.audience}")
        exp = _number(claims.get("exp"))
        if exp is None:
            raise self.challenger.invalid("the token has no expiry (exp)")
        if now >= exp + oauth.leeway_s:
            raise self.challenger.invalid("the token has expired")
        if "nbf" in claims:
            nbf = _number(claims["nbf"])
            if nbf is None:
                raise self.challenger.invalid("the token's nbf is not a number")
            if now < nbf - oauth.leeway_s:
                raise self.challenger.invalid("the token is not valid yet (nbf)")
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise self.challenger.invalid("the token has no subject (sub)")
        scopes = token_scopes(claims)
        missing = [scope for scope in oauth.scopes if scope not in scopes]
        if missing:
            raise self.challenger.insufficient(f"the token lacks the scope {' '.join(missing)}")
        return Identity(
            key=f"user:{oauth.issuer}#{sub}",
            subject=sub,
            issuer=oauth.issuer,
            claims=claims,
            scopes=scopes,
            token=token,
        )
