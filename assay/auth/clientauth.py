"""How the client authenticates at a token endpoint (sans-IO; docs/auth.md, "Client
authentication").

The method is the authorization server's to say (its ``token_endpoint_auth_methods_supported``;
without that member only ``client_secret_basic`` is offered):

- a secret: ``client_secret_basic`` when offered (id and secret form-encoded, then base64, in
  an ``Authorization: Basic`` header), else ``client_secret_post`` (both in the form);
- a private key: ``private_key_jwt``, an assertion signed with the key's own algorithm (RSA:
  RS256, or PS256 where only that is offered; EC: ES256, ES384 or ES512 by its curve; Ed25519:
  EdDSA, or Ed25519 where only that is offered), whose audience is the issuer;
- neither: ``none`` (a public client: its id in the form).

A method fixed by a registration (the server's answer to a dynamic registration) is used as
given. The clock and the assertion's ``jti`` are the caller's.
"""

from __future__ import annotations

import base64
import warnings
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

from assay.auth.discovery import Server

__all__ = [
    "BASIC",
    "JWT",
    "NONE",
    "POST",
    "ASSERTION_TYPE",
    "ClientAuthError",
    "Credentials",
    "Signer",
    "authenticate",
    "basic_header",
    "choose_method",
    "load_key",
]

NONE = "none"
BASIC = "client_secret_basic"
POST = "client_secret_post"
JWT = "private_key_jwt"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_LIFETIME = 60  # seconds


class ClientAuthError(Exception):
    """The client cannot authenticate the way the server asks; ``str()`` is one line."""


@dataclass(frozen=True)
class Signer:
    """A loaded private key and the JWS algorithms it can sign with, preferred first."""

    key: Any  # a joserfc key
    algorithms: tuple[str, ...]
    kind: str  # what the key is, for messages ("an EC P-256 key")


@dataclass(frozen=True)
class Credentials:
    client_id: str
    secret: str | None = None
    signer: Signer | None = None
    method: str | None = None  # fixed by a registration; None: chosen from the metadata


def load_key(pem: bytes) -> Signer:
    """A PEM private key (PKCS#8 or the traditional forms, unencrypted); ValueError (one line,
    the key never in it) for anything else."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from joserfc.jwk import ECKey, OKPKey, RSAKey

    try:
        private = load_pem_private_key(pem, password=None)
    except TypeError:
        raise ValueError("is an encrypted key (give it unencrypted, in a 0600 file)") from None
    except (ValueError, TypeError):
        raise ValueError("is not a PEM private key") from None
    except Exception:  # an unsupported key type (the backend's own errors)
        raise ValueError("is not a PEM private key assay can use") from None
    algorithms: tuple[str, ...]
    key_class: type[RSAKey] | type[ECKey] | type[OKPKey]
    if isinstance(private, rsa.RSAPrivateKey):
        key_class, algorithms, kind = RSAKey, ("RS256", "PS256"), "an RSA key"
    elif isinstance(private, ec.EllipticCurvePrivateKey):
        curve = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}.get(private.curve.name)
        if curve is None:
            raise ValueError(f"is an EC key on the curve {private.curve.name} (P-256, P-384 or P-521 can sign)")
        key_class, algorithms, kind = ECKey, (curve,), f"an EC key ({private.curve.name})"
    elif isinstance(private, ed25519.Ed25519PrivateKey):
        key_class, algorithms, kind = OKPKey, ("EdDSA", "Ed25519"), "an Ed25519 key"
    else:
        raise ValueError("is a key of a kind that cannot sign an assertion (RSA, EC or Ed25519 can)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Signer(key_class.import_key(pem), algorithms, kind)


def choose_method(creds: Credentials, server: Server) -> str:
    """The token-endpoint authentication method for ``creds`` at ``server``."""
    if creds.method is not None:
        return creds.method
    offered = server.auth_methods
    if creds.signer is not None:
        if offered is not None and JWT not in offered:
            raise ClientAuthError(
                f"the authorization server {server.issuer} does not take private_key_jwt "
                f"(it offers {', '.join(offered) or 'nothing'})"
            )
        return JWT
    if creds.secret is not None:
        if offered is None or BASIC in offered:
            return BASIC
        if POST in offered:
            return POST
        raise ClientAuthError(
            f"the authorization server {server.issuer} takes neither client_secret_basic nor "
            f"client_secret_post (it offers {', '.join(offered) or 'nothing'})"
        )
    return NONE


def basic_header(client_id: str, secret: str) -> str:
    """``Basic base64(form-encoded id ":" form-encoded secret)`` (OAuth 2.0, client password)."""
    pair = f"{quote_plus(client_id, safe='')}:{quote_plus(secret, safe='')}"
    return "Basic " + base64.b64encode(pair.encode()).decode("ascii")


def _algorithm(signer: Signer, server: Server) -> str:
    offered = server.signing_algs
    if offered is None:
        return signer.algorithms[0]
    for alg in signer.algorithms:
        if alg in offered:
            return alg
    raise ClientAuthError(
        f"the authorization server {server.issuer} takes no signing algorithm of "
        f"{signer.kind} ({', '.join(signer.algorithms)}; it offers {', '.join(offered)})"
    )


def assertion(signer: Signer, client_id: str, audience: str, algorithm: str, *, now: float, jti: str) -> str:
    """A client assertion (a JWT: the client is issuer and subject, the server the audience)."""
    from joserfc import jwt

    issued = int(now)
    claims = {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": issued,
        "exp": issued + ASSERTION_LIFETIME,
        "jti": jti,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # joserfc warns of EdDSA, which servers still take
        return jwt.encode({"alg": algorithm, "typ": "JWT"}, claims, signer.key, algorithms=[algorithm])


def authenticate(
    creds: Credentials, server: Server, form: dict[str, str], *, now: float, jti: str
) -> tuple[dict[str, str], dict[str, str]]:
    """(the form, the headers) of a token request to ``server`` by ``creds``."""
    method = choose_method(creds, server)
    form = dict(form)
    headers: dict[str, str] = {}
    if method == BASIC:
        if creds.secret is None:
            raise ClientAuthError("the client was registered for client_secret_basic but has no secret")
        headers["Authorization"] = basic_header(creds.client_id, creds.secret)
    elif method == POST:
        if creds.secret is None:
            raise ClientAuthError("the client was registered for client_secret_post but has no secret")
        form.update(client_id=creds.client_id, client_secret=creds.secret)
    elif method == JWT:
        if creds.signer is None:
            raise ClientAuthError("the client was registered for private_key_jwt but has no key")
        alg = _algorithm(creds.signer, server)
        form.update(
            client_id=creds.client_id,
            client_assertion_type=ASSERTION_TYPE,
            client_assertion=assertion(creds.signer, creds.client_id, server.issuer, alg, now=now, jti=jti),
        )
    elif method == NONE:
        form["client_id"] = creds.client_id
    else:
        raise ClientAuthError(f"the client was registered for {method}, which assay cannot do")
    return form, headers
