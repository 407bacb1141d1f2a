"""The HTTP client every remote call of assay goes through (docs/remote.md, "Proxies", "TLS"):
wrap's requests to the server and the OAuth requests made in its name.

:func:`http_client` builds an ``httpx2.AsyncClient`` whose transport picks, for each request,
the proxy :func:`assay.shells.upstream_http.proxies.proxy_for` names for its URL (a loopback host never goes
through one) from the environment it was given, instead of ``httpx2``'s own reading of
``os.environ``. A proxy variable that cannot be used fails the request with
``httpx2.ProxyError`` (one line naming the variable). TLS is verified for every ``https://``
request, against the context given (``--ca-file``'s), else the system's store, whose context is
built on the first ``https://`` request only (a plain ``http://`` run never pays for it).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

import httpx2

from assay.shells.upstream_http.proxies import ProxyError, proxy_for

__all__ = ["RoutedTransport", "http_client"]


class RoutedTransport(httpx2.AsyncBaseTransport):
    """One ``httpx2.AsyncHTTPTransport`` per (TLS or not, proxy), made when first needed."""

    def __init__(
        self,
        environ: Mapping[str, str],
        *,
        verify: ssl.SSLContext | None = None,
        limits: httpx2.Limits = httpx2.Limits(),
    ) -> None:
        self._environ = dict(environ)
        self._limits = limits
        self._transports: dict[tuple[bool, str | None], httpx2.AsyncHTTPTransport] = {}
        self._context = verify

    def _verify(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = httpx2.create_ssl_context(verify=True, trust_env=True)
        return self._context

    def _transport(self, url: httpx2.URL) -> httpx2.AsyncHTTPTransport:
        try:
            proxy = proxy_for(str(url), self._environ)
        except ProxyError as exc:
            raise httpx2.ProxyError(str(exc)) from None
        tls = url.scheme == "https" or (proxy is not None and proxy.lower().startswith("https:"))
        key = (tls, proxy)
        transport = self._transports.get(key)
        if transport is None:
            transport = httpx2.AsyncHTTPTransport(
                verify=self._verify() if tls else False, proxy=proxy, limits=self._limits, trust_env=False
            )
            self._transports[key] = transport
        return transport

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self._transport(request.url).handle_async_request(request)

    async def aclose(self) -> None:
        transports, self._transports = list(self._transports.values()), {}
        for transport in transports:
            await transport.aclose()


def http_client(
    environ: Mapping[str, str],
    *,
    verify: ssl.SSLContext | None = None,
    auth: Any = None,
    headers: Any = None,
    timeout: httpx2.Timeout | float = 30.0,
    limits: httpx2.Limits = httpx2.Limits(),
    follow_redirects: bool = False,
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` with assay's proxy and TLS rules (see the module docstring);
    ``environ`` is the environment to read the proxy variables from, ``verify`` the TLS context
    to verify servers with (None: the system's store)."""
    return httpx2.AsyncClient(
        auth=auth,
        headers=headers,
        timeout=timeout,
        follow_redirects=follow_redirects,
        transport=RoutedTransport(environ, verify=verify, limits=limits),
        trust_env=False,
    )
