"""What the identity tests of serve share (docs/serve.md, "Identity"): keys made here, tokens
signed with them, a clock the test moves and a key-set fetch that counts its calls."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from assay.auth.jwks import JwksError
from assay.gateway.config import OAuthIdentity

ISSUER = "https://issuer.example"
RESOURCE = "https://gw.example/mcp"
NOW = 1_800_000_000.0

RSA = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})
EC = ECKey.generate_key("P-256", parameters={"kid": "ec-1"})
ROTATED = ECKey.generate_key("P-256", parameters={"kid": "ec-2"})


def oauth(**over: Any) -> OAuthIdentity:
    values: dict[str, Any] = {"issuer": ISSUER, "jwks_url": ISSUER + "/jwks", "audience": RESOURCE}
    values.update(over)
    return OAuthIdentity(**values)


def claims(**over: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "exp": NOW + 300, "iat": NOW}
    values.update(over)
    return {k: v for k, v in values.items() if v is not None}


def token(key: RSAKey | ECKey = RSA, alg: str | None = None, header: dict[str, Any] | None = None, **over: Any) -> str:
    alg = alg or ("RS256" if isinstance(key, RSAKey) else "ES256")
    head = {"alg": alg, "kid": key.kid, **(header or {})}
    return jwt.encode({k: v for k, v in head.items() if v is not None}, claims(**over), key, algorithms=[alg])


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(header: dict[str, Any], body: dict[str, Any], signature: bytes = b"") -> str:
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(body).encode())}.{b64(signature)}"


def jwks(*keys: RSAKey | ECKey) -> bytes:
    return json.dumps({"keys": [key.as_dict(private=False) for key in keys]}).encode()


@dataclass
class Clock:
    now: float = NOW

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeFetch:
    """The issuer's key set endpoint, in memory: ``keys`` is what it serves now."""

    keys: list[RSAKey | ECKey] = field(default_factory=lambda: [RSA, EC])
    cache_control: str | None = "max-age=300"
    fail: bool = False
    calls: int = 0

    async def __call__(self) -> tuple[bytes, str | None]:
        self.calls += 1
        if self.fail:
            raise JwksError("cannot reach https://issuer.example for the key set (ConnectError)")
        return jwks(*self.keys), self.cache_control
