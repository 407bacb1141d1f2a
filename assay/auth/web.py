"""The HTTP client of the OAuth requests (the shell; docs/auth.md, "What is sent where").

One ``httpx2.AsyncClient`` of its own, apart from the MCP server's: no default headers (so no
``--header`` value ever reaches an authorization server), no auth, redirects not followed, the
proxy and TLS rules of :func:`assay.shells.upstream_http.client.http_client` (a loopback host is always
reached directly; TLS verified against the system's store, or ``--ca-file`` where wrap has one).
Every body read is capped; a failure to connect is a :class:`WebError` (one line, naming the
host, never a credential).
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx2
import trio

from assay._version import __version__
from assay.shells.upstream_http.client import http_client

__all__ = ["DOC_CAP", "TOKEN_CAP", "Web", "WebError"]

DOC_CAP = 256 * 1024  # a metadata document or a registration answer
TOKEN_CAP = 64 * 1024  # a token endpoint's answer
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0


class WebError(Exception):
    """An OAuth request that got no answer; ``str()`` is one line."""


def _host(url: str) -> str:
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}"
    except ValueError:
        return "<invalid URL>"


class Web:
    def __init__(self, *, ca_file: str | None = None, environ: Mapping[str, str] | None = None) -> None:
        verify: ssl.SSLContext | None = None
        if ca_file is not None:
            verify = ssl.create_default_context()
            verify.load_verify_locations(cafile=ca_file)
        self.client = http_client(
            os.environ if environ is None else environ,
            verify=verify,
            headers={"User-Agent": f"assay/{__version__}"},
            timeout=httpx2.Timeout(connect=CONNECT_TIMEOUT, read=READ_TIMEOUT, write=READ_TIMEOUT, pool=None),
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> Web:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with trio.CancelScope(shield=True):
            await self.client.aclose()

    async def _request(self, method: str, url: str, cap: int, **kwargs: Any) -> tuple[int, bytes | None]:
        """(status, the body, or None when longer than ``cap``)."""
        try:
            async with self.client.stream(method, url, **kwargs) as resp:
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > cap:
                        return resp.status_code, None
                    chunks.append(chunk)
                return resp.status_code, b"".join(chunks)
        except httpx2.TimeoutException:
            raise WebError(f"no answer from {_host(url)} in time") from None
        except httpx2.TransportError as exc:
            raise WebError(f"cannot reach {_host(url)} ({type(exc).__name__})") from None
        except httpx2.InvalidURL:
            raise WebError(f"not a URL assay can reach: {_host(url)}") from None

    async def get_json(self, url: str) -> tuple[int, Any]:
        """(status, the JSON document, or None when the body is not one or too long)."""
        status, body = await self._request("GET", url, DOC_CAP, headers={"Accept": "application/json"})
        if body is None:
            return status, None
        try:
            return status, json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return status, None

    async def post_form(self, url: str, form: dict[str, str], headers: dict[str, str]) -> tuple[int, bytes]:
        status, body = await self._request(
            "POST", url, TOKEN_CAP, data=form, headers={"Accept": "application/json", **headers}
        )
        return status, body or b""

    async def post_json(self, url: str, doc: dict[str, Any]) -> tuple[int, bytes]:
        status, body = await self._request("POST", url, DOC_CAP, json=doc, headers={"Accept": "application/json"})
        return status, body or b""
