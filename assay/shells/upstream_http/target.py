"""Where a remote wrap connects and what it sends along (sans-IO): docs/remote.md, "Options".

:func:`target_from` checks ``--url``, ``--transport``, ``--header`` (with ``${VAR}`` read from
the given environment), ``--header-env`` (``Name=VAR``: the value is VAR's, whole),
``--header-env-if-set`` (the same, no header when VAR is unset or blank), ``--bearer-env``
(an Authorization header: the Bearer scheme and VAR's value), ``--ca-file`` and ``--allow-insecure-http`` before
anything connects,
and raises :class:`TargetError` with one line. No message ever contains a header value: a
header is named by its name only. :func:`shown_url` is the URL as wrap prints it (no user
information, no query: either may hold a secret).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["RESERVED_HEADERS", "Target", "TargetError", "is_loopback", "shown_url", "target_from"]

# Headers wrap sets itself, per request or per session: a --header may not set them.
RESERVED_HEADERS = frozenset(
    {
        "accept",
        "content-type",
        "content-length",
        "host",
        "transfer-encoding",
        "connection",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "last-event-id",
    }
)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")  # an HTTP field name
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # a field value: no controls but tab
MAX_HEADERS = 64
MAX_HEADER_BYTES = 16384


class TargetError(Exception):
    """A remote target that cannot be used: one line, exit 2 (docs/remote.md, "Options")."""


@dataclass(frozen=True)
class Target:
    url: str
    transport: str  # auto | streamable-http | sse
    headers: tuple[tuple[str, str], ...]  # (name as given, value with ${VAR} replaced)
    ca_file: str | None
    sources: tuple[str | None, ...] = ()  # per header, the variable(s) its value comes from, or None

    @property
    def header_sources(self) -> list[tuple[str, str | None]]:
        """(name, where its value comes from) of each header (docs/auth.md, "Messages")."""
        return [(name, self.sources[i] if i < len(self.sources) else None) for i, (name, _) in enumerate(self.headers)]

    @property
    def header_names(self) -> list[str]:
        return [name for name, _ in self.headers]

    def digest_argv(self) -> list[str]:
        """What the session context's command digest covers for a remote server: the URL and
        the header names, never their values (docs/wrap.md, "One-run outputs and session
        reports")."""
        argv = ["--url", self.url]
        for name in self.header_names:
            argv += ["--header", name]
        return argv


_LEGACY_V4 = re.compile(r"[0-9a-fA-FxX.]+\Z")  # what inet_aton reads: 127.1, 0x7f.0.0.1, 2130706433


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a numeric host names, read as the system's resolver reads it (IPv4 in the
    short and hexadecimal forms ``inet_aton`` takes too), or None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _LEGACY_V4.match(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def is_loopback(host: str) -> bool:
    """A host whose connections stay on this machine (docs/remote.md, "Options", "Proxies"):
    ``localhost`` and names under it, a loopback address (127.0.0.0/8, ``::1``, and either as an
    IPv4-mapped IPv6 address), or a "this host" address (``0.0.0.0``, ``::``), in any numeric
    form the resolver reads."""
    host = host.strip("[]").lower()
    name = host[:-1] if host.endswith(".") else host
    if name == "localhost" or name.endswith(".localhost"):
        return True
    address = _address(host)
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def shown_url(url: str) -> str:
    """``scheme://host[:port]/path``, with ``?…`` when there was a query: what wrap prints."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<invalid URL>"
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    return f"{parts.scheme}://{netloc}{parts.path}" + ("?…" if parts.query else "")


def _header(text: str, environ: Mapping[str, str]) -> tuple[str, str]:
    name, sep, raw = text.partition(":")
    name = name.strip()
    if not sep or not _TOKEN.match(name):
        shown = name if _TOKEN.match(name) else "(not a header name)"
        raise TargetError(f"--header must be 'Name: value' with a valid header name (got {shown})")
    if name.lower() in RESERVED_HEADERS:
        raise TargetError(f"--header {name}: wrap sets this header itself")

    def expand(match: re.Match[str]) -> str:
        var = match.group(1)
        if var not in environ:
            raise TargetError(f"--header {name}: ${{{var}}} is not set in wrap's environment")
        return environ[var]

    value = _VAR.sub(expand, raw.strip())
    if _BAD_VALUE.search(value):
        raise TargetError(f"--header {name}: its value holds a line break or a control character")
    return name, value


def _header_from_env(text: str, environ: Mapping[str, str]) -> tuple[str, str]:
    name, sep, var = text.partition("=")
    name = name.strip()
    if not sep or not _TOKEN.match(name) or not _ENV_NAME.match(var):
        raise TargetError("--header-env must be 'Name=VAR': a header name and an environment variable name")
    if name.lower() in RESERVED_HEADERS:
        raise TargetError(f"--header-env {name}: wrap sets this header itself")
    if var not in environ:
        raise TargetError(f"--header-env {name}: {var} is not set in wrap's environment")
    value = environ[var].strip()
    if _BAD_VALUE.search(value):
        raise TargetError(f"--header-env {name}: the value of {var} holds a line break or a control character")
    return name, value


def _bearer_from_env(var: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """``--bearer-env VAR``: ``Authorization: Bearer <VAR's value>``; VAR unset or empty is an
    error, as Codex's ``bearer_token_env_var`` is (docs/remote.md, "Options")."""
    if not _ENV_NAME.match(var):
        raise TargetError("--bearer-env must name an environment variable")
    value = environ.get(var, "").strip()
    if var not in environ:
        raise TargetError(f"--bearer-env: {var} is not set in wrap's environment")
    if not value:
        raise TargetError(f"--bearer-env: {var} is empty")
    if _BAD_VALUE.search(value):
        raise TargetError(f"--bearer-env: the value of {var} holds a line break or a control character")
    return "Authorization", f"Bearer {value}"


def _optional_from_env(text: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """``--header-env-if-set Name=VAR``: as ``--header-env``, but VAR unset or blank sends no
    header (Codex's ``env_http_headers``: docs/remote.md, "Options")."""
    name, sep, var = text.partition("=")
    if sep and _ENV_NAME.match(var) and not environ.get(var, "").strip():
        if not _TOKEN.match(name.strip()):
            raise TargetError("--header-env-if-set must be 'Name=VAR': a header name and an environment variable name")
        return None
    try:
        return _header_from_env(text, environ)
    except TargetError as exc:
        raise TargetError(str(exc).replace("--header-env", "--header-env-if-set", 1)) from None


def target_from(
    url: str,
    *,
    transport: str,
    headers: Sequence[str],
    header_env: Sequence[str] = (),
    ca_file: str | None,
    allow_insecure_http: bool,
    environ: Mapping[str, str],
    bearer_env: str | None = None,
    header_env_if_set: Sequence[str] = (),
) -> Target:
    """The checked target of ``wrap --url`` (see the module docstring)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018  (a bad port raises here)
    except ValueError:
        raise TargetError("--url is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise TargetError("--url must be an http:// or https:// URL with a host")
    if any(ch.isspace() or ord(ch) < 0x20 for ch in url):
        raise TargetError("--url must not contain spaces or control characters")
    if parts.username is not None or parts.password is not None:
        raise TargetError("--url must not hold a user name or password (give them with --header)")
    if parts.scheme == "http" and not is_loopback(host) and not allow_insecure_http:
        raise TargetError(
            f"--url {shown_url(url)}: plain http:// to a host that is not loopback sends everything "
            "in clear text; use https://, or --allow-insecure-http"
        )
    if ca_file is not None and parts.scheme != "https":
        raise TargetError("--ca-file is only for an https:// --url")
    if len(headers) + len(header_env) + len(header_env_if_set) > MAX_HEADERS:
        raise TargetError(f"at most {MAX_HEADERS} --header and --header-env options")
    parsed = tuple(_header(text, environ) for text in headers) + tuple(_header_from_env(t, environ) for t in header_env)
    # per header, the variable(s) its value comes from (a 401 names them: docs/remote.md)
    sources: tuple[str | None, ...] = tuple(
        ", ".join(_VAR.findall(text.partition(":")[2])) or None for text in headers
    ) + tuple(text.partition("=")[2] for text in header_env)
    for text in header_env_if_set:
        present = _optional_from_env(text, environ)
        if present is not None:
            parsed += (present,)
            sources += (text.partition("=")[2],)
    if bearer_env is not None:
        if any(name.lower() == "authorization" for name, _ in parsed):
            raise TargetError("--bearer-env sends Authorization, which another --header or --header-env gives too")
        parsed += (_bearer_from_env(bearer_env, environ),)
        sources += (bearer_env,)
    if sum(len(n) + len(v) for n, v in parsed) > MAX_HEADER_BYTES:
        raise TargetError(f"the --header values add up to more than {MAX_HEADER_BYTES} bytes")
    return Target(url=url, transport=transport, headers=parsed, ca_file=ca_file, sources=sources)
