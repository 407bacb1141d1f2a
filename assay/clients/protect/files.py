"""The file layer of `assay mcp protect` (docs/protect.md): read a client config and protect's
record of it, write a backup and the new record into assay's state directory
(:mod:`assay.clients.protect.state`), replace the file atomically (refusing when it changed meanwhile),
write the starter policy, and
check that the policy loads as wrap will load it (:func:`assay.policy.load_policy_file`)."""

from __future__ import annotations

import os
import stat
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from assay.clients import ConfigLocation
from assay.clients.protect.model import EntryRecord, ProtectError, Result
from assay.clients.protect.starter import STARTER_POLICY
from assay.clients.protect.state import fill as _fill

__all__ = ["FileOutcome", "apply_to_file", "write_starter_policy", "check_policy"]


@dataclass
class FileOutcome:
    result: Result
    original: str = ""
    backup: str | None = None
    written: bool = False
    record_path: str = ""


def _read(path: str) -> tuple[bytes, os.stat_result]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise ProtectError(f"{path} does not exist") from None
    except OSError as exc:
        raise ProtectError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ProtectError(f"{path} is not a regular file")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), st
    except OSError as exc:
        raise ProtectError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _decode(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtectError(f"{path} is not valid UTF-8 (byte {exc.start})") from None


def _write_new(path: str, data: bytes, mode: int) -> None:
    _fill(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode), data, mode)


def _state(path: str) -> str:
    from assay.policy.storeapi import StoreError
    from assay.statedir import ensure_state_dir

    try:
        ensure_state_dir(path)
    except StoreError as exc:
        raise ProtectError(str(exc)) from None
    return path


Edit = Callable[[str, ConfigLocation, "Sequence[EntryRecord] | None"], Result]
"""What :func:`apply_to_file` computes: the new text from the text, its location and protect's record."""


def apply_to_file(
    path: str,
    location: ConfigLocation,
    edit: Edit,
    *,
    dry_run: bool = False,
    now: float | None = None,
    state: str | None = None,
) -> FileOutcome:
    """Read ``path`` and protect's record of it, compute ``edit(text, location, record)``, and
    unless ``dry_run`` or nothing changed: write a backup into the state directory, the new
    record, then replace the config atomically (a temporary file in the same directory, the
    original mode kept, renamed over it). The file is read again just before the rename; if it
    changed meanwhile, nothing is replaced (the record is put back) and ProtectError says so.
    A symlinked config (a dotfiles repository) is edited where the link points, so the link
    stays a link (docs/protect.md, "Safety of the write")."""
    from assay.clients.protect import state as st_
    from assay.statedir import state_dir

    path = os.path.realpath(path)
    data, st = _read(path)
    original = _decode(data, path)
    state_path = state_dir(None, os.environ) if state is None else state
    rec_path = st_.record_path(state_path, location.client, path)
    record = st_.load_record(rec_path)
    result = edit(original, location, record)
    outcome = FileOutcome(result, original, record_path=rec_path)
    if dry_run:
        return outcome
    if not result.changed:
        if record is not None and result.record is not None and result.record != record:
            _forget(rec_path, result.record, location.client, path)
        return outcome
    when = time.time() if now is None else now
    state_path = _state(state_path)
    mode = stat.S_IMODE(st.st_mode)
    new = result.text.encode("utf-8")
    try:
        outcome.backup = st_.write_backup(state_path, location.client, path, data, when)
    except OSError as exc:
        raise ProtectError(f"cannot write the backup in {state_path}: {exc.strerror or exc}") from None
    old_record = None
    if record is not None:
        with open(rec_path, "rb") as fh:
            old_record = fh.read()
    if result.record is not None:
        try:
            st_.write_private(rec_path, st_.dump_record(result.record, location.client, path, when))
        except OSError as exc:
            raise ProtectError(f"cannot write protect's record {rec_path}: {exc.strerror or exc}") from None
    directory = os.path.dirname(os.path.abspath(path))
    try:
        try:
            fd, tmp = tempfile.mkstemp(prefix=".assay-protect-", dir=directory)
        except OSError as exc:
            raise ProtectError(f"cannot write in {directory}: {exc.strerror or exc}") from None
        try:
            _fill(fd, new, mode)
            again, st2 = _read(path)
            if again != data or (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino):
                raise ProtectError(f"{path} changed while assay worked on it; nothing was written (run it again)")
            os.replace(tmp, path)
        except OSError as exc:
            raise ProtectError(f"cannot replace {path}: {exc.strerror or exc}") from None
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
    except ProtectError:
        if result.record is not None:  # the config was not changed: neither is the record
            _put_back(rec_path, old_record)
        raise
    if result.record == [] and os.path.lexists(rec_path):
        os.unlink(rec_path)  # nothing of the file is protect's any more
    outcome.written = True
    return outcome


def _forget(rec_path: str, entries: list[Any], client: str, path: str) -> None:
    """Write a record that only lost entries (removed from the file, or put back by hand)."""
    from assay.clients.protect.state import dump_record, write_private

    try:
        if entries:
            write_private(rec_path, dump_record(entries, client, path, time.time()))
        else:
            os.unlink(rec_path)
    except OSError as exc:
        raise ProtectError(f"cannot write protect's record {rec_path}: {exc.strerror or exc}") from None


def _put_back(rec_path: str, old: bytes | None) -> None:
    from assay.clients.protect.state import write_private

    try:
        if old is None:
            os.unlink(rec_path)
        else:
            write_private(rec_path, old)
    except OSError:
        pass


def write_starter_policy(path: str) -> None:
    """Create ``path`` with :data:`STARTER_POLICY` (never overwrites; parents are created)."""
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
        _write_new(path, STARTER_POLICY.encode("utf-8"), 0o644)
    except FileExistsError:
        raise ProtectError(f"{path} already exists; it was left as is") from None
    except OSError as exc:
        raise ProtectError(f"cannot write the starter policy {path}: {exc.strerror or exc}") from None


def check_policy(path: str, *, warn: Callable[[str], object] | None = None) -> str | None:
    """None when the policy at ``path`` loads as `assay mcp wrap` will load it (the one loader,
    :func:`assay.policy.load_policy_file`: a regular file within ``ASSAY_MCP_MAX_POLICY_BYTES``,
    the YAML budget), else the one-line reason (docs/protect.md)."""
    from assay.policy import PolicyError, PolicyFileError, load_policy_file

    try:
        load_policy_file(path, warn=warn)
    except (PolicyFileError, PolicyError) as exc:  # the loader's one line
        return str(exc)
    except OSError as exc:
        return f"cannot read policy {path}: {exc.strerror or exc}"
    return None
