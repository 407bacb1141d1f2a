"""The policy-path jail and the bounded policy read (docs/server.md, "Policy path jail").

Every policy tool goes through :func:`open_policy` and :func:`read_open`; nothing else opens a
caller-named file. The jail holds under races: the caller's path is first normalised lexically
(a `..` that climbs above the root is refused), then opened *relative to a descriptor of the
root*, never by an absolute path string that could be re-resolved after a check:

* with ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`` where the kernel has it (Linux 5.6+),
  so the kernel itself refuses any step out of the root, atomically;
* otherwise (or when that call is refused, for instance by a seccomp filter) one component at a
  time with ``openat(O_NOFOLLOW)``, reading each symbolic link and following it only while it
  stays inside the root.

A policy named by one component (`policy.yaml`, the common case) is first tried with a plain
``openat(O_NOFOLLOW)`` in the root descriptor: it succeeds only on an entry of the root itself
that is not a symbolic link, which is exactly what both ways above open for it; anything else
(a link, a missing name, any error) takes the way above. :meth:`RootDir.stat_entry` looks at
such an entry the same way (``fstatat`` without following links) for the cache's unchanged-file
check.

The file itself is opened ``O_NONBLOCK`` and checked with ``fstat``: only a regular file is read,
so a FIFO, socket or device in the root is refused at once and never waited on.

Messages never contain the root or any absolute path, only fixed texts, OS strerror text and,
for a missing file, the path exactly as the caller gave it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
from collections import deque
from collections.abc import Callable

from assay.server.errors import ToolError

__all__ = [
    "LIMIT_MESSAGE",
    "NOT_REGULAR_MESSAGE",
    "RootDir",
    "normalize_policy_path",
    "open_policy",
    "read_open",
]

LIMIT_MESSAGE = "policy file exceeds the configured byte limit"
NOT_REGULAR_MESSAGE = "policy is not a regular file"
ESCAPE_MESSAGE = "policy resolves outside policy_root"

_MAX_SYMLINKS = 40  # as the kernel's own limit
# What opening a symlink with O_NOFOLLOW gives (Linux ELOOP/ENOTDIR, FreeBSD EMLINK, NetBSD EFTYPE).
_LINK_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ELOOP", "ENOTDIR", "EMLINK", "EFTYPE") if hasattr(errno, name)
)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_PATH = getattr(os, "O_PATH", 0)
# The file itself: read-only, never blocking on open (a FIFO without a writer), never a tty.
FILE_FLAGS = os.O_RDONLY | _O_NONBLOCK | _O_NOCTTY | _O_CLOEXEC
_STAT_NOFOLLOW = os.stat in os.supports_dir_fd and os.stat in os.supports_follow_symlinks
_LEAF_FLAGS = FILE_FLAGS | _O_NOFOLLOW  # the last component, never followed if it is a link
# A directory on the way: O_PATH where it exists (needs no read permission, as a path walk).
_DIR_FLAGS = (_O_PATH or os.O_RDONLY) | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC

# openat2(2): the syscall number is the same on every architecture with the unified table.
_OPENAT2_NR = {
    "x86_64": 437,
    "amd64": 437,
    "aarch64": 437,
    "arm64": 437,
    "i386": 437,
    "i686": 437,
    "armv7l": 437,
    "armv8l": 437,
    "riscv64": 437,
    "ppc64le": 437,
    "ppc64": 437,
    "s390x": 437,
    "loongarch64": 437,
}
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Openat2:
    """``openat2`` through ``syscall(2)``; switches itself off for good on ENOSYS/EPERM/EINVAL."""

    def __init__(self) -> None:
        self.available = False
        self._syscall: Callable[..., int] | None = None
        nr = _OPENAT2_NR.get(platform.machine().lower()) if platform.system() == "Linux" else None
        if nr is None:
            return
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            syscall = libc.syscall
        except (OSError, AttributeError):
            return
        syscall.restype = ctypes.c_long
        syscall.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
        self._nr = nr
        self._syscall = syscall
        self._how = _OpenHow(FILE_FLAGS, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
        self._how_ref = ctypes.byref(self._how)
        self._how_size = ctypes.sizeof(self._how)
        self.available = True

    def open(self, dir_fd: int, relpath: bytes) -> int:
        """The new descriptor, or raise OSError (ENOSYS-like refusals switch the call off)."""
        if self._syscall is None:  # never set up on this platform (``available`` stays False)
            raise _Unavailable()
        fd = self._syscall(self._nr, dir_fd, relpath, self._how_ref, self._how_size)
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        if err in (errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG):
            self.available = False  # not this kernel, or filtered: the walk does the same job
            raise _Unavailable()
        raise OSError(err, os.strerror(err))


class _Unavailable(Exception):
    pass


class _Escape(Exception):
    pass


_OPENAT2 = _Openat2()


class RootDir:
    """A descriptor of the canonical policy root, opened once; every policy open is relative to it."""

    def __init__(self, root: str, *, use_openat2: bool = True) -> None:
        self.path = root
        self.parts = tuple(p for p in root.split(os.sep) if p)
        self.fd: int | None = None
        self.error: OSError | None = None
        self.use_openat2 = use_openat2
        try:
            self.fd = os.open(root, _DIR_FLAGS & ~_O_NOFOLLOW)
        except OSError as exc:
            self.error = exc

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass

    def stat_entry(self, name: str) -> os.stat_result | None:
        """``fstatat`` of one entry of the root, links not followed, when it is a regular file;
        None otherwise (a link, a missing name, any error, or no way to stat without following)."""
        if self.fd is None or not _STAT_NOFOLLOW or name in ("", ".", "..") or "/" in name:
            return None
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except (OSError, ValueError):
            return None
        return st if stat.S_ISREG(st.st_mode) else None

    def open(self, parts: list[str]) -> int:
        """Open ``parts`` (normalised, non-empty) beneath the root; OSError or :class:`_Escape`."""
        if self.fd is None:
            raise self.error or OSError(errno.EBADF, os.strerror(errno.EBADF))
        if _O_NOFOLLOW and len(parts) == 1 and parts[0] not in ("", ".", ".."):
            try:  # an entry of the root that is no symlink: what openat2 and the walk open too
                return os.open(parts[0], _LEAF_FLAGS, dir_fd=self.fd)
            except OSError:
                pass  # a link, a missing name, an error: the full resolution decides
        if self.use_openat2 and _OPENAT2.available:
            try:
                return _OPENAT2.open(self.fd, os.fsencode("/".join(parts)))
            except _Unavailable:
                pass
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.ELOOP):
                    raise
                # EXDEV: a step out of the root, or an absolute symlink (which the kernel refuses
                # under RESOLVE_BENEATH even when it points back inside). The walk tells them apart.
        return self._walk(parts)

    def _walk(self, parts: list[str]) -> int:
        todo = deque(parts)
        stack: list[int] = []  # descriptors of the directories below the root, deepest last
        links = 0
        try:
            while todo:
                name = todo.popleft()
                if name in ("", "."):
                    continue
                cur = stack[-1] if stack else self.fd
                if name == "..":
                    if not stack:
                        raise _Escape()
                    os.close(stack.pop())
                    continue
                last = not todo
                try:
                    fd = os.open(name, _LEAF_FLAGS if last else _DIR_FLAGS, dir_fd=cur)
                except OSError as exc:
                    if exc.errno not in _LINK_ERRNOS:
                        raise
                    try:
                        target = os.readlink(name, dir_fd=cur)
                    except OSError:
                        raise exc from None  # not a symlink: the original error stands
                    links += 1
                    if links > _MAX_SYMLINKS:
                        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP)) from None
                    if target.startswith("/"):
                        rel = self._inside(target)
                        while stack:
                            os.close(stack.pop())
                        todo.extendleft(reversed(rel))
                    else:
                        todo.extendleft(reversed(target.split("/")))
                    continue
                if last:
                    return fd
                stack.append(fd)
            # The path ended on a directory (`sub/..`, or a link to one): open it as a file so
            # the regular-file check refuses it with the usual text.
            return os.open(".", FILE_FLAGS, dir_fd=stack[-1] if stack else self.fd)
        finally:
            for held in stack:
                os.close(held)

    def _inside(self, target: str) -> list[str]:
        """An absolute link target as components below the root, or :class:`_Escape`."""
        comps = [p for p in target.split("/") if p not in ("", ".")]
        n = len(self.parts)
        if len(comps) < n or tuple(comps[:n]) != self.parts:
            raise _Escape()
        return comps[n:]


def normalize_policy_path(p: str) -> list[str]:
    """The lexical walk: components below the root, or a ToolError for the fixed refusals."""
    if not p.strip():
        raise ToolError("E_INVALID_REQUEST", "policy path is empty")
    if os.path.isabs(p) or p.startswith("\\"):
        raise ToolError("E_PERMISSION_DENIED", "absolute paths are not allowed")
    parts: list[str] = []
    for segment in p.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not parts:
                raise ToolError("E_PERMISSION_DENIED", "path escapes policy_root")
            parts.pop()
        else:
            parts.append(segment)
    if "\x00" in p:
        raise ToolError("E_POLICY_READ", "embedded null byte")
    return parts


def _os_text(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def open_policy(root: RootDir, p: str, parts: list[str] | None = None) -> tuple[int, os.stat_result]:
    """Jail + open + regular-file check: (descriptor, its fstat). The caller closes the descriptor.
    ``parts`` is ``normalize_policy_path(p)`` when the caller already has it."""
    if parts is None:
        parts = normalize_policy_path(p)
    try:
        fd = root.open(parts) if parts else root.open(["."])
    except _Escape:
        raise ToolError("E_PERMISSION_DENIED", ESCAPE_MESSAGE) from None
    except FileNotFoundError:
        raise ToolError("E_POLICY_NOT_FOUND", f"Policy not found: {p}") from None
    except OSError as exc:
        raise ToolError("E_POLICY_READ", _os_text(exc)) from None
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise ToolError("E_POLICY_READ", _os_text(exc)) from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ToolError("E_POLICY_READ", os.strerror(errno.EISDIR))
        raise ToolError("E_POLICY_READ", NOT_REGULAR_MESSAGE)
    return fd, st


def read_open(fd: int, limit: int) -> bytes:
    """The bytes of a policy the jail opened, through the one policy reader
    (:func:`assay.policy.read_policy_fd`: at most ``limit + 1`` bytes read, never trusting the
    file's size), its refusals as the server's errors (docs/server.md, "Policy path jail")."""
    from assay.policy.files import PolicyFileError, read_policy_fd  # loaded at server start-up

    try:
        return read_policy_fd(fd, limit=limit)
    except PolicyFileError as exc:
        if exc.too_large:
            raise ToolError("E_LIMIT_EXCEEDED", LIMIT_MESSAGE) from None
        raise ToolError("E_POLICY_READ", exc.reason) from None
