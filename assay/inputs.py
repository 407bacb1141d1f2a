"""The one reader for small input files: policies, manifests, keys, trust policies, tool files.

Every such file is read the same way, so none of them can hang or exhaust memory at startup:

- opened with ``O_NONBLOCK`` (a FIFO is never waited on) and ``O_NOCTTY``;
- checked with ``fstat`` on the open descriptor (not the name, so a swap after the check
  changes nothing): anything but a regular file (FIFO, device such as ``/dev/zero``, socket,
  directory) is refused;
- read to at most ``limit + 1`` bytes whatever the file claims to be; more than ``limit`` is
  refused. Exactly ``limit`` bytes are accepted.

Errors are :class:`InputFileError`, whose ``str`` is one line naming what was read and why it
was refused. It is an :class:`OSError`, so callers that already report ``OSError`` keep working;
``strerror`` holds the short reason without the path.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping

__all__ = [
    "InputFileError",
    "read_input_file",
    "read_input",
    "read_fd",
    "open_regular",
    "policy_byte_limit",
    "DEFAULT_POLICY_BYTES",
    "POLICY_BYTES_ENV",
    "SMALL_FILE_BYTES",
]

DEFAULT_POLICY_BYTES = 1_000_000
POLICY_BYTES_ENV = "ASSAY_MCP_MAX_POLICY_BYTES"
SMALL_FILE_BYTES = 1024 * 1024  # keys, trust policies and tool definitions

_CHUNK = 1 << 16


class InputFileError(OSError):
    """An input file that cannot be used; ``str(e)`` is ``<what> <path>: <reason>``."""

    def __init__(self, what: str, path: str, reason: str, code: int = errno.EINVAL, *, too_large: bool = False) -> None:
        super().__init__(code, reason)
        self.what = what
        self.path = path
        self.reason = reason
        self.too_large = too_large  # refused for its size alone (the server's E_LIMIT_EXCEEDED)

    def __str__(self) -> str:
        return f"{self.what} {self.path}: {self.reason}"


def policy_byte_limit(environ: Mapping[str, str] | None = None) -> int:
    """The policy ceiling: ``ASSAY_MCP_MAX_POLICY_BYTES`` when it is an unsigned integer, else
    1,000,000 (the server's rule for the same variable)."""
    env = os.environ if environ is None else environ
    raw = env.get(POLICY_BYTES_ENV, "").strip()
    if raw.isascii() and raw.isdigit():
        return int(raw)
    return DEFAULT_POLICY_BYTES


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_input_file(path: str, *, limit: int, what: str = "file") -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises :class:`InputFileError` for a missing or unreadable file, anything that is not a
    regular file, and a file longer than ``limit`` bytes.
    """
    return read_input(path, limit=limit, what=what)[0]


def read_input(path: str, *, limit: int, what: str = "file") -> tuple[bytes, os.stat_result]:
    """:func:`read_input_file` plus the ``fstat`` of the descriptor the bytes came from."""
    fd, info = open_regular(path, what)
    try:
        data = read_fd(fd, limit=limit, what=what, path=path)
    finally:
        os.close(fd)
    return data, info


def open_regular(path: str, what: str = "file") -> tuple[int, os.stat_result]:
    """A descriptor of the regular file ``path``, opened without blocking and checked on the
    descriptor, and its ``fstat``; the caller closes it. Raises :class:`InputFileError`."""
    if "\x00" in path:
        raise InputFileError(what, path, "embedded null byte in the path")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputFileError(what, path, exc.strerror or type(exc).__name__, exc.errno or errno.EIO) from None
    try:
        info = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise InputFileError(what, path, exc.strerror or type(exc).__name__, exc.errno or errno.EIO) from None
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = _kind(info.st_mode)
        raise InputFileError(what, path, kind if kind == "not a regular file" else f"not a regular file ({kind})")
    return fd, info


def read_fd(fd: int, *, limit: int, what: str = "file", path: str = "") -> bytes:
    """At most ``limit`` bytes from the open descriptor ``fd``, whatever its size claims: up to
    ``limit + 1`` bytes are read and more than ``limit`` is refused (:class:`InputFileError` with
    ``too_large``). The caller opened it (and checked it is a regular file) and closes it."""
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        try:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        except BlockingIOError:
            raise InputFileError(what, path, "read would block") from None
        except OSError as exc:
            raise InputFileError(what, path, exc.strerror or type(exc).__name__, exc.errno or errno.EIO) from None
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:
        raise InputFileError(what, path, f"larger than the {limit}-byte limit", errno.EFBIG, too_large=True)
    return b"".join(chunks)
