"""What protect keeps in assay's state directory (docs/protect.md, "The record" and "Backups"):
one record a config file, ``<state>/protect/<client>-<digest>.json``, and the backups of the
config, ``<state>/backups/<client>-<digest>-<UTC time>-<n>-<file name>`` (the first one, the
config as it was before protect first changed it, and the newest :data:`KEEP_BACKUPS`). ``<digest>`` is the first 16 hex digits of the SHA-256 of the
config's real path. Every file is 0600 and written atomically (a temporary file renamed)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Sequence

from assay.clients.protect.model import EntryRecord, MemberEdit, ProtectError

__all__ = [
    "KEEP_BACKUPS",
    "RECORD_FORMAT",
    "config_digest",
    "record_path",
    "load_record",
    "dump_record",
    "fill",
    "write_private",
    "write_backup",
]

KEEP_BACKUPS = 5
RECORD_FORMAT = "assay-protect-record/1"


def config_digest(real_path: str) -> str:
    return hashlib.sha256(real_path.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _stem(client: str, real_path: str) -> str:
    return f"{client}-{config_digest(real_path)}"


def record_path(state: str, client: str, real_path: str) -> str:
    return os.path.join(state, "protect", _stem(client, real_path) + ".json")


def dump_record(entries: Sequence[EntryRecord], client: str, config: str, now: float) -> bytes:
    doc = {
        "format": RECORD_FORMAT,
        "client": client,
        "config": config,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "entries": [
            {
                "map": list(e.map),
                "name": e.name,
                "edits": [
                    {
                        "key": list(m.key),
                        "original": m.original,
                        "written": m.written,
                        **({"after": m.after} if m.after else {}),
                    }
                    for m in e.edits
                ],
            }
            for e in entries
        ],
    }
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _strs(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("not a list of strings")
    return tuple(value)


def load_record(path: str) -> list[EntryRecord] | None:
    """The entries of the record at ``path``; None when there is none. ProtectError when it
    cannot be read or is not a record (then nothing is guessed)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ProtectError(f"cannot read protect's record {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(data.decode("utf-8"))
        if doc.get("format") != RECORD_FORMAT:
            raise ValueError(f"format is not {RECORD_FORMAT}")
        out = []
        for e in doc["entries"]:
            edits = []
            for m in e["edits"]:
                original, written, after = m["original"], m["written"], m.get("after", "")
                if (
                    not (original is None or isinstance(original, str))
                    or not isinstance(written, str)
                    or not isinstance(after, str)
                ):
                    raise ValueError("an edit is not text")
                edits.append(MemberEdit(_strs(m["key"]), original, written, after))
            if not isinstance(e["name"], str) or not edits:
                raise ValueError("an entry has no name or no edits")
            out.append(EntryRecord(_strs(e["map"]), e["name"], tuple(edits)))
        return out
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ProtectError(f"protect's record {path} is damaged ({exc}); move it away to go on") from None


def fill(fd: int, data: bytes, mode: int) -> None:
    """Give ``fd`` the mode, write all of ``data`` (short writes retried), fsync, close."""
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_private(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically with mode 0600 (the directory is created 0700)."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".assay-", dir=directory)
    try:
        fill(fd, data, 0o600)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def write_backup(state: str, client: str, real_path: str, data: bytes, now: float) -> str:
    """Write a backup of ``data`` (the config's bytes before an edit) and keep only the first
    backup of the config (its text before protect ever changed it) and the newest
    :data:`KEEP_BACKUPS`. Returns the backup's path."""
    directory = os.path.join(state, "backups")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    stem = _stem(client, real_path) + "-"
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
    base = os.path.basename(real_path)
    n = 0
    while os.path.lexists(os.path.join(directory, f"{stem}{stamp}-{n:03d}-{base}")):
        n += 1
    path = os.path.join(directory, f"{stem}{stamp}-{n:03d}-{base}")
    fill(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), data, 0o600)
    mine = sorted(name for name in os.listdir(directory) if name.startswith(stem) and not name.startswith("."))
    for old in mine[1:-KEEP_BACKUPS]:  # the first stays: the pristine config (docs/protect.md, "Backups")
        try:
            os.unlink(os.path.join(directory, old))
        except FileNotFoundError:
            pass
    return path
