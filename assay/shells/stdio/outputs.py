"""wrap's create-new outputs and the one-run lifecycle (docs/wrap.md, "One-run outputs and
session reports").

Two kinds of create-new output:

- one-run outputs (`--decision-log-new`, `--request-receipts-out`, `--session-context-out`,
  `--session-stop-out`): created with O_EXCL|O_NOFOLLOW when the run becomes a session, then
  written only through the descriptors opened then, never reopened by path;
- session-end reports (`--coverage-out`, `--state-window-out`, `--observed-manifest-out`):
  published at session end with :func:`assay.manifest.publish.publish_new`, never replacing.

All of them are checked before the child is spawned: nothing may exist at the path
(lstat: files, directories, symlinks, dangling ones included), the parent must be an existing
directory, and no path may name the same file as any other wrap output.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import BinaryIO

from assay.session.effects import Sink


class OutputError(Exception):
    """An output path was refused or could not be created or written (fatal, exit 2)."""


def identity_key(path: str) -> str:
    """What two output paths are compared by: the parent resolved with realpath plus the final
    name; the absolute, lexically normalised path when the parent does not exist."""
    absolute = os.path.abspath(path)
    parent, name = os.path.split(absolute)
    if os.path.isdir(parent):
        return os.path.join(os.path.realpath(parent), name)
    return os.path.normpath(absolute)


def check_before_spawn(create_new: Mapping[str, str], others: Mapping[str, str]) -> None:
    """The pre-spawn checks of every create-new output; raises OutputError with a one-line reason.

    ``create_new`` maps flag -> path for the outputs that must be new; ``others`` maps flag ->
    path for the remaining wrap outputs (append-mode logs) they must not clash with.
    """
    seen: dict[str, str] = {}
    for flag, path in others.items():
        seen.setdefault(identity_key(path), flag)
    for flag, path in create_new.items():
        key = identity_key(path)
        if key in seen:
            raise OutputError(f"{flag} {path} names the same file as {seen[key]}; give each output its own path")
        seen[key] = flag
    for flag, path in create_new.items():
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise OutputError(f"{flag} {path}: {exc.strerror or exc}") from None
        else:
            what = "a symlink" if stat.S_ISLNK(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode) else "a file"
            raise OutputError(f"{flag} {path} already exists ({what}); use a fresh path for each run")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise OutputError(f"{flag} {path}: parent directory does not exist")


def create_exclusive(flag: str, path: str) -> BinaryIO:
    """O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW, mode 0666 minus umask; an unbuffered file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == 17:  # EEXIST: taken after the pre-spawn check (a race)
            raise OutputError(
                f"{flag} {path} was created by someone else after the start-up check; refusing it"
            ) from None
        raise OutputError(f"cannot create {flag} {path}: {exc.strerror or exc}") from None
    return os.fdopen(fd, "wb", buffering=0)


@dataclass
class OneRunPlan:
    """The one-run outputs a run asked for, in creation order."""

    decision_log_new: str | None = None
    request_receipts: str | None = None
    session_context: str | None = None
    session_stop: str | None = None

    def items(self) -> list[tuple[Sink, str]]:
        """(sink, path) for each requested output, in creation order; the sink's value is its flag."""
        rows = [
            (Sink.DECISION_LOG_NEW, self.decision_log_new),
            (Sink.RECEIPTS, self.request_receipts),
            (Sink.SESSION_CONTEXT, self.session_context),
            (Sink.SESSION_STOP, self.session_stop),
        ]
        return [(sink, path) for sink, path in rows if path]
