"""The token endpoint of the test authorization server (tests/remote/authserver.py): client
authentication as its metadata offers it (client_secret_basic, client_secret_post,
private_key_jwt with RS256/PS256/ES256/ES384/ES512/EdDSA, none) and the grants (authorization
code with PKCE, refresh with rotation, client credentials, the token exchange of an identity
provider's ID token for an ID-JAG, the JWT bearer grant of an ID-JAG). Every token request is
recorded in ``state.stats["token_requests"]`` (grant, client, the method it authenticated with,
the algorithm of an assertion)."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
import warnings
from typing import Any
from urllib.parse import unquote_plus

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, OKPKey, RSAKey

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ALGS = ["RS256", "PS256", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"]


def load_key(pem: str) -> Any:
    for cls in (RSAKey, ECKey, OKPKey):
        try:
            return cls.import_key(pem)
        except Exception:
            continue
    raise ValueError("not a key")


def decode(token: str, key: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jwt.decode(token, key, algorithms=ALGS)


def sign(claims: dict[str, Any], key: Any, typ: str) -> str:
    alg = {"RSA": "RS256", "EC": "ES256", "OKP": "EdDSA"}[key.key_type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jwt.encode({"alg": alg, "typ": typ}, claims, key, algorithms=[alg])


class Refused(Exception):
    def __init__(self, error: str, status: int = 400) -> None:
        super().__init__(error)
        self.error = error
        self.status = status


def decode_basic(authorization: str) -> tuple[str, str]:
    """The (client id, secret) of an ``Authorization: Basic`` value as an OAuth server reads it:
    base64, split at the first colon, each half form-decoded (ValueError when it is not one)."""
    if not authorization.lower().startswith("basic "):
        raise ValueError("not Basic")
    pair = base64.b64decode(authorization[6:].strip(), validate=True).decode()
    raw_id, sep, raw_secret = pair.partition(":")
    if not sep:
        raise ValueError("no colon")
    return unquote_plus(raw_id), unquote_plus(raw_secret)


def authenticate(state: Any, form: dict[str, str], authorization: str, note: dict[str, Any]) -> str:
    """The client id the request authenticated as (Refused when it did not)."""
    offered = state.auth_methods
    if authorization.lower().startswith("basic "):
        try:
            cid, secret = decode_basic(authorization)
        except ValueError:  # UnicodeDecodeError too
            raise Refused("invalid_client", 401) from None
        method = "client_secret_basic"
    elif form.get("client_assertion"):
        if form.get("client_assertion_type") != ASSERTION_TYPE:
            raise Refused("invalid_client", 401)
        token = form["client_assertion"]
        header = token.split(".")[0]
        head = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
        note["alg"] = head.get("alg")
        cid = form.get("client_id") or ""
        client = state.clients.get(cid)
        if client is None or not client.get("key"):
            raise Refused("invalid_client", 401)
        try:
            claims = decode(token, load_key(client["key"])).claims
        except (JoseError, ValueError):
            raise Refused("invalid_client", 401) from None
        if claims.get("iss") != cid or claims.get("sub") != cid or claims.get("aud") != state.base:
            raise Refused("invalid_client", 401)
        if int(claims.get("exp", 0)) < time.time() or claims.get("jti") in state.seen_jti:
            raise Refused("invalid_client", 401)
        state.seen_jti.add(claims.get("jti"))
        secret, method = None, "private_key_jwt"
    elif "client_secret" in form:
        cid, secret, method = form.get("client_id", ""), form["client_secret"], "client_secret_post"
    else:
        cid, secret, method = form.get("client_id", ""), None, "none"
    note.update(client_id=cid, method=method)
    if method not in offered:
        raise Refused("invalid_client", 401)
    client = state.clients.get(cid)
    if client is None:
        raise Refused("invalid_client", 401)
    if method in ("client_secret_basic", "client_secret_post"):
        if not client.get("secret") or client["secret"] != secret:
            raise Refused("invalid_client", 401)
    if method == "none" and (client.get("secret") or client.get("key")):
        raise Refused("invalid_client", 401)
    fixed = client.get("method")
    if fixed and fixed != method:
        raise Refused("invalid_client", 401)
    return cid


def _pkce_ok(verifier: str, challenge: str) -> bool:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=") == challenge


def grant(state: Any, form: dict[str, str], authorization: str) -> dict[str, Any]:
    """The token response of one token request (Refused for an error response)."""
    kind = form.get("grant_type")
    state.stats["grants"].append(kind)
    note: dict[str, Any] = {"grant": kind, "scope": form.get("scope"), "resource": form.get("resource")}
    state.stats["token_requests"].append(note)
    cid = authenticate(state, form, authorization, note)
    if kind == "authorization_code":
        code = state.codes.pop(str(form.get("code")), None)
        if code is None or code["client_id"] != cid or code["redirect_uri"] != form.get("redirect_uri"):
            raise Refused("invalid_grant")
        if not _pkce_ok(str(form.get("code_verifier", "")), code["challenge"]):
            raise Refused("invalid_grant")
        return state.issue(cid, code["scope"], refresh=state.gives_refresh(code["scope"]))
    if kind == "refresh_token":
        old = state.refresh.get(str(form.get("refresh_token")))
        if old is None or old["client_id"] != cid:
            raise Refused("invalid_grant")
        del state.refresh[str(form.get("refresh_token"))]
        return state.issue(cid, old["scope"], refresh=True)
    if kind == "client_credentials":
        if note["method"] == "none":
            raise Refused("unauthorized_client")
        return state.issue(cid, str(form.get("scope") or "mcp"), refresh=False)
    if kind == TOKEN_EXCHANGE:
        return exchange(state, cid, form)
    if kind == JWT_BEARER:
        return bearer(state, cid, form)
    raise Refused("unsupported_grant_type")


def exchange(state: Any, cid: str, form: dict[str, str]) -> dict[str, Any]:
    """The identity provider's side: an ID token it issued to ``cid`` for an ID-JAG."""
    if state.idp_key is None:
        raise Refused("unsupported_grant_type")
    if form.get("requested_token_type") != ID_JAG or form.get("subject_token_type") != ID_TOKEN:
        raise Refused("invalid_request")
    try:
        claims = decode(str(form.get("subject_token")), state.idp_key).claims
    except JoseError:
        raise Refused("invalid_grant") from None
    if claims.get("iss") != state.base or claims.get("aud") != cid or int(claims.get("exp", 0)) < time.time():
        raise Refused("invalid_grant")
    audience = form.get("audience")
    if not audience or audience not in state.jag_clients:
        raise Refused("invalid_target")
    now = int(time.time())
    jag = sign(
        {
            "iss": state.base,
            "sub": claims["sub"],
            "aud": audience,
            "resource": form.get("resource"),
            "client_id": state.jag_clients[audience],
            "scope": form.get("scope") or "mcp",
            "iat": now,
            "exp": now + 300,
            "jti": secrets.token_hex(8),
        },
        state.idp_key,
        "oauth-id-jag+jwt",
    )
    return {
        "issued_token_type": ID_JAG,
        "access_token": jag,
        "token_type": "N_A",
        "expires_in": 300,
        "scope": form.get("scope") or "mcp",
    }


def bearer(state: Any, cid: str, form: dict[str, str]) -> dict[str, Any]:
    """The resource authorization server's side: an ID-JAG of a trusted identity provider."""
    assertion = str(form.get("assertion"))
    for issuer, key in state.trusted_idps.items():
        try:
            token = decode(assertion, key)
        except JoseError:
            continue
        claims = token.claims
        if (
            claims.get("iss") != issuer
            or token.header.get("typ") != "oauth-id-jag+jwt"
            or claims.get("aud") != state.base
            or claims.get("resource") != f"{state.base}/mcp"
            or claims.get("client_id") != cid
            or int(claims.get("exp", 0)) < time.time()
            or claims.get("jti") in state.seen_jti
        ):
            raise Refused("invalid_grant")
        state.seen_jti.add(claims["jti"])
        return state.issue(cid, str(claims.get("scope") or "mcp"), refresh=False)
    raise Refused("invalid_grant")
