"""wrap's cache of parsed policy documents (docs/wrap.md, "The policy cache").

Importing PyYAML and parsing a policy costs ~20 ms of every wrap start on the 2-core dev
machine, for a file that rarely changes. So wrap keeps the parsed document (plain JSON: the
YAML's mappings, lists and scalars) of each policy that loaded, in the state directory, under
``policy-cache/<key>.json``, and the next start with the same bytes reads it instead. Only the
parse is skipped: the document is converted, checked and warned about as a parsed one is
(:func:`assay.policy.files.load_policy_file`), so errors, warnings and the digest are the
same either way.

The key is the SHA-256 of: this cache's format, assay's version, the source of the YAML reader
(:mod:`assay.policy.yamlio`), the size and modification time of the installed PyYAML, the
byte ceiling the file was read under (the alias expansion budget derives from it) and the
file's bytes. So a cache is never used across versions of assay or PyYAML, for other bytes or
under another ceiling. A document that JSON cannot carry exactly (a key that is not a string,
NaN or an infinity) is not kept.

An entry is used only when all of this holds, and is otherwise ignored (never an error, never a
warning: the file is parsed as if there were no cache): the state directory and its
``policy-cache`` directory are directories of this user that no one else can write (as
:func:`assay.statedir.ensure_state_dir` requires); the entry is a regular file of this user
(not a symlink), writable by no one else, under the policy ceiling plus a margin; it is
strict JSON (no duplicate members, NaN or infinities) with this format, this version and
this key, and its document is a mapping. Entries are written to a new file in the same
directory and renamed into place, so a reader sees a whole entry or none; at most
:data:`MAX_ENTRIES` are kept (the oldest go).

Trust: the entry replaces the parse, so whoever can write an entry chooses the policy wrap
enforces for the file whose bytes it names. Only the user (and root) can: the same users who
can edit the policy, the sessions' database beside it, or the user's shell start-up files.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from typing import Any

from assay._version import __version__

__all__ = ["FORMAT", "MAX_ENTRIES", "PolicyCache", "policy_cache"]

FORMAT = "assay.policy_cache.v1"
MAX_ENTRIES = 32
DIR_NAME = "policy-cache"
_MARGIN = 4096  # an entry's framing over its document


class PolicyCache:
    """A :class:`assay.policy.files.DocumentCache` over one state directory (it may not exist
    yet: it is created, 0700, when the first entry is written)."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.directory = os.path.join(state_dir, DIR_NAME)
        self._salt: bytes | None = None

    def key(self, data: bytes, ceiling: int) -> str | None:
        """The entry's key for these bytes under this ceiling; None when the YAML reader or
        PyYAML cannot be located (then nothing is cached)."""
        if self._salt is None:
            self._salt = _code_salt()
            if self._salt is None:
                return None
        h = hashlib.sha256(self._salt)
        h.update(f"\0{ceiling}\0".encode())
        h.update(data)
        return h.hexdigest()

    def lookup(self, data: bytes, ceiling: int) -> dict[str, Any] | None:
        key = self.key(data, ceiling)
        if key is None or not (_private_dir(self.state_dir) and _private_dir(self.directory)):
            return None
        raw = _read_private(os.path.join(self.directory, key + ".json"), _cap(ceiling))
        if raw is None:
            return None
        try:
            entry = json.loads(raw, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            return None
        if not (
            isinstance(entry, dict)
            and entry.get("format") == FORMAT
            and entry.get("assay") == __version__
            and entry.get("key") == key
            and isinstance(entry.get("document"), dict)
        ):
            return None
        doc: dict[str, Any] = entry["document"]
        return doc

    def snapshot(self, doc: Any) -> object | None:
        """The JSON text of a just-parsed document, or None when JSON does not carry it exactly."""
        if not isinstance(doc, dict):
            return None
        try:
            text = json.dumps(doc, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
            if json.loads(text) != doc:  # a key that is not a string
                return None
        except (ValueError, TypeError, RecursionError):
            return None
        return text

    def store(self, data: bytes, ceiling: int, snapshot: object) -> None:
        key = self.key(data, ceiling)
        if key is None or not isinstance(snapshot, str):
            return
        body = f'{{"format":"{FORMAT}","assay":{json.dumps(__version__)},"key":"{key}","document":{snapshot}}}'
        if len(body) > _cap(ceiling):
            return  # (aliases expanded, escapes): an entry larger than a lookup reads
        try:
            _write_entry(self.state_dir, self.directory, key, body.encode("ascii"))
        except (OSError, ValueError):
            pass  # a cache: a run never fails for it


def policy_cache(state_dir_option: str | None, env: Mapping[str, str]) -> PolicyCache:
    """The cache of the state directory a wrap run with these options uses
    (:func:`assay.statedir.state_dir`)."""
    from assay.statedir import state_dir

    return PolicyCache(state_dir(state_dir_option, env))


def _cap(ceiling: int) -> int:
    """The largest entry read or written for a policy under ``ceiling``."""
    return 8 * ceiling + _MARGIN


def _code_salt() -> bytes | None:
    """What the parse of a file depends on besides its bytes and the ceiling: this format,
    assay's version, the YAML reader's source and the installed PyYAML (found, not imported)."""
    from importlib.machinery import PathFinder

    reader = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "policy", "yamlio.py")
    try:
        with open(reader, "rb") as fh:
            source = fh.read()
        spec = PathFinder.find_spec("yaml")
        if spec is None or spec.origin is None:
            return None
        st = os.stat(spec.origin)
    except (OSError, ImportError, ValueError):
        return None
    pyyaml = f"{spec.origin}\0{st.st_size}\0{st.st_mtime_ns}"
    return f"{FORMAT}\0{__version__}\0{hashlib.sha256(source).hexdigest()}\0{pyyaml}".encode("utf-8", "surrogateescape")


def _mine(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _private_dir(path: str) -> bool:
    """A directory (a symlink to one counts, as the state directory's own check allows) of
    this user that no one else can write."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False
    return stat.S_ISDIR(st.st_mode) and _mine(st)


def _read_private(path: str, cap: int) -> bytes | None:
    """The bytes of a regular file of this user that no one else can write, at most ``cap``;
    None otherwise (a symlink, a FIFO, too large, missing, unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _mine(st) or st.st_size > cap:
            return None
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:
                return None
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate member")
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _write_entry(state_dir: str, directory: str, key: str, body: bytes) -> None:
    """Write one entry atomically (a new file renamed into place), creating the directories
    (0700) and dropping the oldest entries over :data:`MAX_ENTRIES`."""
    final = os.path.join(directory, key + ".json")
    if write_private(state_dir, directory, final, os.path.join(directory, f".{key}"), body):
        _trim(directory)


def write_private(state_dir: str, directory: str, final: str, temp_prefix: str, body: bytes) -> bool:
    """Write ``final`` in ``directory`` (under the state directory) atomically: a new file (mode
    0600, ``temp_prefix`` + a random part + ``.tmp``) renamed into place, the directories
    created (0700). False, nothing written, when the state directory cannot be made or
    ``directory`` is not a private directory of this user; an error of the write is raised
    (the temporary file removed). Also the code cache's writer (:mod:`assay.wrap.codecache`)."""
    from assay.policy.storeapi import StoreError
    from assay.statedir import ensure_state_dir

    try:
        ensure_state_dir(state_dir)
    except StoreError:
        return False
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    if not _private_dir(directory):
        return False
    temp = f"{temp_prefix}.{os.urandom(6).hex()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temp, final)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    return True


def _trim(directory: str) -> None:
    entries = []
    with os.scandir(directory) as it:
        for item in it:
            if item.name.endswith(".json") and item.is_file(follow_symlinks=False):
                try:
                    entries.append((item.stat(follow_symlinks=False).st_mtime_ns, item.path))
                except OSError:
                    continue
    entries.sort()
    for _mtime, path in entries[: max(0, len(entries) - MAX_ENTRIES)]:
        try:
            os.unlink(path)
        except OSError:
            pass
