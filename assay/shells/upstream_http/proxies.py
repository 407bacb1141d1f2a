"""Which proxy an HTTP request of wrap goes through (sans-IO): docs/remote.md, "Proxies".

:func:`proxy_for` reads the proxy variables of the environment wrap was given (never
``os.environ`` behind its back) for one URL:

- a loopback host (:func:`assay.shells.upstream_http.target.is_loopback`: ``localhost`` and names under it,
  127.0.0.0/8, ``::1``, and the "this host" addresses ``0.0.0.0`` and ``::``) is always
  reached directly, whatever the variables say: a proxy would send what is meant for this
  machine, tokens included, to another one;
- ``NO_PROXY`` (or ``no_proxy``): a comma-separated list; ``*`` alone means no proxy at all;
  an entry is a host name (it and every name under it; a leading ``.`` or ``*.`` is the same),
  an IP address, or a network in CIDR form, each with ``:port`` to match that port only;
- then the variable of the URL's scheme, ``HTTPS_PROXY`` or ``HTTP_PROXY``, else ``ALL_PROXY``
  (lower case first: ``https_proxy`` before ``HTTPS_PROXY``). ``HTTP_PROXY`` in upper case is
  not read when ``REQUEST_METHOD`` is set (a CGI environment, where a client's ``Proxy:``
  header becomes ``HTTP_PROXY``).

A proxy is an ``http://`` or ``https://`` URL (``host:port`` alone means ``http://``); a SOCKS
proxy or a value that is not a URL is a :class:`ProxyError` (one line), never ignored.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

from assay.shells.upstream_http.target import is_loopback

__all__ = ["ProxyError", "no_proxy_matches", "proxy_for"]


class ProxyError(Exception):
    """A proxy variable wrap cannot use: one line naming the variable (never its value, which
    may hold a password)."""


def _variable(environ: Mapping[str, str], name: str) -> tuple[str, str] | None:
    """(the variable's name as found, its value) of the first of ``name`` in lower and upper
    case that is set and not empty."""
    for var in (name.lower(), name.upper()):
        if var == "HTTP_PROXY" and "REQUEST_METHOD" in environ:
            continue
        value = environ.get(var, "").strip()
        if value:
            return var, value
    return None


def _host_port(entry: str) -> tuple[str, int | None]:
    """A NO_PROXY entry's host and port (``[::1]:8080``, ``::1``, ``example.com:443``)."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif entry.count(":") == 1:
        host, _, port = entry.partition(":")
    else:
        host, port = entry, ""
    return host, int(port) if port.isdigit() and port.isascii() and len(port) <= 5 else None


def no_proxy_matches(no_proxy: str, host: str, port: int) -> bool:
    """Whether ``host`` (as in a URL, lower case, no brackets) on ``port`` is in ``no_proxy``."""
    host = host.rstrip(".")
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.replace(" ", ",").split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry:
            try:
                network = ipaddress.ip_network(entry.strip("[]"), strict=False)
            except ValueError:
                continue
            if address is not None and address.version == network.version and address in network:
                return True
            continue
        name, entry_port = _host_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        name = name.removeprefix("*").removeprefix(".").rstrip(".")
        if not name:
            continue
        if address is not None:
            try:
                if ipaddress.ip_address(name) == address:
                    return True
            except ValueError:
                pass
            continue
        if host == name or host.endswith("." + name):
            return True
    return False


def _proxy_url(var: str, value: str) -> str:
    url = value if "://" in value else f"http://{value}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (a bad port raises here)
    except ValueError:
        raise ProxyError(f"{var} is not a proxy URL") from None
    scheme = parts.scheme.lower()
    if scheme.startswith("socks"):
        raise ProxyError(
            f"{var} names a SOCKS proxy, which wrap cannot use (set NO_PROXY for this host, or unset {var})"
        )
    if scheme not in ("http", "https") or not parts.hostname:
        raise ProxyError(f"{var} is not an http:// or https:// proxy URL")
    return url


def proxy_for(url: str, environ: Mapping[str, str]) -> str | None:
    """The proxy URL a request to ``url`` goes through, or None for a direct connection (see
    the module docstring). A URL wrap cannot read goes direct (the request fails on its own)."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError:
        return None
    if not host or is_loopback(host):
        return None
    no_proxy = _variable(environ, "no_proxy")
    if no_proxy is not None and no_proxy_matches(no_proxy[1], host, port):
        return None
    scheme = parts.scheme.lower()
    found = _variable(environ, f"{scheme}_proxy") if scheme in ("http", "https") else None
    found = found or _variable(environ, "all_proxy")
    return None if found is None else _proxy_url(*found)
