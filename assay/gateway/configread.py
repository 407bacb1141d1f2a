"""The values of `assay mcp serve`'s config file, read one by one (docs/serve.md, "The config
file"): :class:`_Reader` turns each value into its type or one problem line naming where it is
(mappings with their known keys, strings, durations, sizes, counts, secrets, URLs), and the
listen address's helpers. Sans-IO; :mod:`assay.gateway.configfile` reads the sections with it."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from assay.gateway.config import Secret
from assay.policy.durations import DurationError, parse_duration
from assay.policy.yamlio import type_name

__all__ = ["is_loopback", "split_listen"]

# -- the reader --------------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_SIZE = re.compile(r"(\d+)\s*(B|KiB|MiB|GiB|KB|MB|GB)?")
_SIZE_UNITS = {None: 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "KB": 1000, "MB": 1000**2, "GB": 1000**3}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_LOOPBACK_HOSTS = ("localhost",)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 without brackets) is this machine alone, as
    an address to *listen* on: ``0.0.0.0`` and ``::`` are every interface here, not loopback
    (the upstream shell's ``is_loopback`` counts them as this host, rightly for connecting)."""
    if host.lower() in _LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_listen(value: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:8787`` for IPv6) as (host, port); raises ValueError."""
    if value.startswith("["):
        host, sep, rest = value[1:].partition("]:")
        if not sep:
            raise ValueError("expected [IPv6]:port")
        port = rest
    else:
        host, sep, port = value.rpartition(":")
        if not sep or not host or ":" in host:
            raise ValueError("expected host:port (an IPv6 address in brackets: [::1]:8787)")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("the port must be a number from 0 to 65535")
    return host, int(port)


class _Reader:
    """Reads the parsed YAML into the model, one line per problem in :attr:`problems`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.problems: list[str] = []

    def problem(self, path: str, text: str) -> None:
        line = f"{self.name}: {path}: {text}" if path else f"{self.name}: {text}"
        # one line a terminal shows as it is, whatever a key of the file holds
        self.problems.append("".join(c if c.isprintable() else ascii(c)[1:-1] for c in line))

    def mapping(self, value: Any, path: str, known: tuple[str, ...]) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.problem(path, f"must be a mapping, got {type_name(value)}")
            return None
        for key in value:
            if not isinstance(key, str) or key not in known:
                self.problem(f"{path}.{key}" if path else str(key), f"unknown key (known: {', '.join(known)})")
        return value

    def string(self, value: Any, path: str, *, required: bool = False) -> str | None:
        if value is None:
            if required:
                self.problem(path, "is required")
            return None
        if not isinstance(value, str) or not value:
            self.problem(path, f"must be a non-empty string, got {type_name(value)}")
            return None
        return value

    def strings(self, value: Any, path: str) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            hint = f' (write ["{value}"])' if isinstance(value, str) else ""
            self.problem(path, f"must be a list of non-empty strings{hint}")
            return None
        return tuple(value)

    def duration(self, value: Any, path: str, default: float) -> float:
        if value is None:
            return default
        try:
            return parse_duration(value)
        except DurationError as exc:
            self.problem(path, str(exc))
            return default

    def size(self, value: Any, path: str, default: int) -> int:
        if value is None:
            return default
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        m = _SIZE.fullmatch(value) if isinstance(value, str) else None
        if m is None or int(m.group(1)) <= 0:
            self.problem(path, "expected a size such as 4MiB, 512KiB or a number of bytes above zero")
            return default
        return int(m.group(1)) * _SIZE_UNITS[m.group(2)]

    def count(self, value: Any, path: str, default: int) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            self.problem(path, "must be a whole number above zero")
            return default
        return value

    def secret(self, value: Any, path: str, environ: Mapping[str, str]) -> Secret | None:
        if isinstance(value, str):
            # never echo a value that may be the secret itself
            self.problem(path, "a secret is never written in the file: use {file: PATH} or {env: VARIABLE}")
            return None
        got = self.mapping(value, path, ("file", "env"))
        if got is None:
            return None
        file, env = got.get("file"), got.get("env")
        if (file is None) == (env is None):
            self.problem(path, "exactly one of file or env")
            return None
        if env is not None:
            if not isinstance(env, str) or not _ENV_NAME.fullmatch(env):
                self.problem(f"{path}.env", "must be an environment variable's name")
                return None
            return Secret(env=env)
        name = self.string(file, f"{path}.file")
        return None if name is None else Secret(file=name)

    def url(self, value: Any, path: str, *, required: bool = False) -> str | None:
        text = self.string(value, path, required=required)
        if text is None:
            return None
        parts = urlsplit(text)
        if parts.scheme == "https" and parts.hostname:
            return text
        if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
            return text
        self.problem(path, "must be an https URL (http only to a loopback address)")
        return None
