"""The OAuth token store (docs/auth.md, "Where tokens live").

One JSON file per server URL in ``<state dir>/oauth/``, named by the sha256 of the normalized
URL and recording the URL itself; mode 0600 in a 0700 directory, written atomically (a temporary
file, fsync, rename, fsync of the directory). A record holds the tokens, the client registration
and what a later run needs to go on without a browser: the issuer the login belongs to, the
token's absolute expiry, the authorization-server and protected-resource metadata, and where a
credential comes from (a file path or a variable name, never the secret itself). What a record
means is :mod:`assay.auth.record`'s; this module reads and writes the files.

Reading is careful: the file is opened without following a symlink and without blocking (a
FIFO is refused, not waited on), must be a regular file owned by this user, and is read with a
byte cap. Anything else, or content that is not a record, is a :class:`TokenFileError` whose
text is one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "MAX_BYTES",
    "TokenFileError",
    "delete",
    "load",
    "normalize_url",
    "oauth_dir",
    "record_path",
    "records",
    "save",
]

MAX_BYTES = 256 * 1024
VERSION = 1
_DEFAULT_PORTS = {"http": 80, "https": 443}
_KEYS = {
    "version",
    "url",
    "issuer",
    "resource",
    "tokens",
    "expires_at",
    "client_info",
    "oauth_metadata",
    "resource_metadata",
    "grant",
    "saved",
}


class TokenFileError(Exception):
    """A token file or the token directory cannot be used; ``str()`` is one line."""


def normalize_url(url: str) -> str:
    """The URL a record is keyed on: scheme and host lower-cased, a default port dropped, the
    fragment dropped; path and query kept as given. Raises ``ValueError`` for anything that is
    not an absolute http(s) URL."""
    text = url.strip()
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {text[:200]!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError("a server URL with user information is not supported")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in URL: {text[:200]!r}") from None
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path, parts.query, ""))


def oauth_dir(state: str) -> str:
    return os.path.join(state, "oauth")


def record_path(state: str, url: str) -> str:
    """The file of ``url``'s record (``url`` already normalized)."""
    return os.path.join(oauth_dir(state), hashlib.sha256(url.encode()).hexdigest() + ".json")


def ensure_dir(state: str) -> str:
    """Create (or check) the state directory and its ``oauth`` directory, both 0700."""
    from assay.policy.storeapi import StoreError
    from assay.statedir import ensure_state_dir

    try:
        ensure_state_dir(state)
    except StoreError as exc:
        raise TokenFileError(str(exc)) from None
    path = oauth_dir(state)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise TokenFileError(f"cannot create {path}: {exc.strerror or exc}") from None
    _check_dir(path)
    return path


def _check_dir(path: str) -> None:
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise TokenFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise TokenFileError(f"{path} is not a directory (a symlink or a file); remove it")
    if st.st_uid != os.geteuid():
        raise TokenFileError(f"{path} belongs to another user (uid {st.st_uid})")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)


def _read_capped(path: str) -> bytes:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        why = "a symlink" if os.path.islink(path) else (exc.strerror or str(exc))
        raise TokenFileError(f"the token file {path} cannot be read ({why}); remove it and log in again") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TokenFileError(f"the token file {path} is not a regular file; remove it and log in again")
        if st.st_uid != os.geteuid():
            raise TokenFileError(f"the token file {path} belongs to another user (uid {st.st_uid}); remove it")
        if st.st_size > MAX_BYTES:
            raise TokenFileError(f"the token file {path} is larger than {MAX_BYTES} bytes; remove it and log in again")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_BYTES:
            raise TokenFileError(f"the token file {path} is larger than {MAX_BYTES} bytes; remove it and log in again")
        return b"".join(chunks)
    except OSError as exc:
        raise TokenFileError(f"the token file {path} cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _check_shape(path: str, data: Any) -> dict[str, Any]:
    bad = f"the token file {path} is not an assay token record"
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("url"), str):
        raise TokenFileError(f"{bad}; remove it and log in again")
    if set(data) - _KEYS:
        raise TokenFileError(f"{bad} (unknown members); remove it and log in again")
    for key in ("tokens", "client_info", "oauth_metadata", "resource_metadata", "grant"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise TokenFileError(f"{bad} ({key} is not an object); remove it and log in again")
    for key in ("issuer", "resource"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise TokenFileError(f"{bad} ({key} is not a string); remove it and log in again")
    for key in ("expires_at", "saved"):
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise TokenFileError(f"{bad} ({key} is not a number); remove it and log in again")
    tokens = data.get("tokens")
    if tokens is not None and not isinstance(tokens.get("access_token"), str):
        raise TokenFileError(f"{bad} (no access token); remove it and log in again")
    return data


def read_file(path: str) -> dict[str, Any] | None:
    """The record in ``path``; None when there is no such file."""
    try:
        raw = _read_capped(path)
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise TokenFileError(f"the token file {path} is not valid JSON; remove it and log in again") from None
    return _check_shape(path, data)


def load(state: str, url: str) -> dict[str, Any] | None:
    """The record of ``url`` (normalized) in the state directory ``state``; None when none is
    stored. Creates nothing. A record naming another URL is refused."""
    path = record_path(state, url)
    record = read_file(path)
    if record is not None and record["url"] != url:
        raise TokenFileError(f"the token file {path} records another URL; remove it and log in again")
    return record


def save(state: str, record: dict[str, Any], *, now: Callable[[], float] = time.time) -> str:
    """Write ``record`` atomically as its URL's file (0600); returns the path."""
    directory = ensure_dir(state)
    record = {**record, "version": VERSION, "saved": now()}
    path = record_path(state, record["url"])
    data = json.dumps(record, sort_keys=True, indent=1).encode()
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    except OSError as exc:
        raise TokenFileError(f"cannot write in {directory}: {exc.strerror or exc}") from None
    try:
        from assay.clients.protect.state import fill  # the one careful write of a private file

        fill(fd, data, 0o600)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise TokenFileError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return path


def delete(state: str, url: str) -> bool:
    """Remove ``url``'s file; False when there was none."""
    path = record_path(state, url)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise TokenFileError(f"cannot remove {path}: {exc.strerror or exc}") from None
    return True


def records(state: str) -> Iterator[tuple[str, dict[str, Any] | TokenFileError]]:
    """Every file of the token directory as (path, record or the error reading it), sorted."""
    directory = oauth_dir(state)
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise TokenFileError(f"cannot list {directory}: {exc.strerror or exc}") from None
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue
        path = os.path.join(directory, name)
        try:
            record = read_file(path)
        except TokenFileError as exc:
            yield path, exc
            continue
        if record is not None and os.path.basename(record_path(state, record["url"])) != name:
            yield path, TokenFileError(f"the token file {path} records another URL; remove it and log in again")
        elif record is not None:
            yield path, record


def summary(record: dict[str, Any], now: float) -> dict[str, Any]:
    """What `assay mcp auth list` shows of a record: never a token or a secret."""
    tokens = record.get("tokens") or {}
    expires_at = record.get("expires_at")
    grant = record.get("grant") or {}
    return {
        "url": record.get("url"),
        "expires_at": expires_at,
        "expired": expires_at is not None and expires_at <= now,
        "scope": tokens.get("scope"),
        "refresh_token": bool(tokens.get("refresh_token")),
        "grant": str(grant.get("kind", "authorization_code")),
        "issuer": record.get("issuer") or (record.get("oauth_metadata") or {}).get("issuer"),
    }
