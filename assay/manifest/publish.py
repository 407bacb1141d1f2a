"""Publish a whole file under its final name without ever replacing anything
(docs/manifest.md, "Rules for every file": create-new).

Why: an approval baseline, a candidate or a private key must never silently replace what an
operator already has, and a crash or a full disk must never leave a half-written file under the
final name. So the bytes go into a fresh temporary file in the *same* directory (same filesystem),
are flushed to disk, and only then appear under the final name in one step that fails if the name
is taken by anything at all -- a file, a directory, a symlink, a dangling symlink:

1. ``link(temp, final)``: ``link(2)`` never follows or replaces an existing ``final``; or, where the
   filesystem has no hard links, ``renameat2(temp, final, RENAME_NOREPLACE)``.
2. the temporary name is always removed, whether publication succeeded or failed.

:func:`publish_new` is the create-new publisher (manifests, keys, one-run outputs).
:func:`publish_replace` is its sibling for outputs that are *meant* to replace (``tool sign
--in-place``, ``keygen --force``): same temporary-file discipline, then an atomic ``rename``, so a
reader sees the old bytes or the new bytes, never a mixture, and a symlink at the final name is
replaced rather than written through.

Errors are :class:`PublishError` whose text is one line ready for ``fatal:``/``error:`` output.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import sys

__all__ = ["PublishError", "publish_new", "publish_replace"]


class PublishError(OSError):
    """Publication failed; nothing was created or replaced and no temporary file remains."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def _strerror(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _parent(path: str) -> str:
    parent = os.path.dirname(path)
    return parent if parent else "."


def _write_temp(path: str, data: bytes, mode: int) -> str:
    """Create a fresh temporary file beside ``path``, write ``data`` fully, fsync; return its name.

    The file is created with ``mode`` minus the umask (0600 for private keys stays 0600 or
    narrower), and never exists under a wider mode, even briefly.
    """
    parent = _parent(path)
    base = os.path.basename(path) or "output"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        temp = os.path.join(parent, f".{base}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(temp, flags, mode)
        except FileExistsError:
            continue
        except OSError as exc:
            raise PublishError(f"creating temporary output beside {path}: {_strerror(exc)}") from None
        break
    else:  # pragma: no cover - 100 collisions of 48 random bits
        raise PublishError(f"creating temporary output beside {path}: too many name collisions")
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)  # a short write is not an error: keep going
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        _unlink_quietly(temp)
        raise PublishError(f"writing temporary output for {path}: {_strerror(exc)}") from None
    except BaseException:
        _unlink_quietly(temp)
        raise
    return temp


def _unlink_quietly(name: str) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass


_RENAME_NOREPLACE = 1
_AT_FDCWD = -100


def _renameat2_noreplace(src: str, dst: str) -> None:
    """``renameat2(..., RENAME_NOREPLACE)`` for filesystems without hard links (Linux only)."""
    if not sys.platform.startswith("linux"):
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def publish_new(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
    """Create ``path`` holding exactly ``data``; never replace or write through anything there.

    Raises :class:`PublishError` (with the create-new wording of docs/manifest.md) when the directory is missing or not
    writable, when writing fails, or when ``path`` already exists as any kind of file.
    """
    final = os.fspath(path)
    temp = _write_temp(final, data, mode)
    try:
        try:
            os.link(temp, final, follow_symlinks=False)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS):
                raise
            _renameat2_noreplace(temp, final)  # no hard links here: move without replacing
    except OSError as exc:
        raise PublishError(f"creating {final} without overwriting an existing file: {_strerror(exc)}") from None
    finally:
        _unlink_quietly(temp)  # after a renameat2 the temp name is already gone


def publish_replace(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
    """Atomically put ``data`` at ``path``, replacing what is there (never writing through a link)."""
    final = os.fspath(path)
    if os.path.isdir(final) and not os.path.islink(final):
        raise PublishError(f"writing {final}: {os.strerror(errno.EISDIR)}")
    temp = _write_temp(final, data, mode)
    try:
        os.replace(temp, final)
    except OSError as exc:
        _unlink_quietly(temp)
        raise PublishError(f"writing {final}: {_strerror(exc)}") from None
