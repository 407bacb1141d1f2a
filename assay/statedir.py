"""Where assay keeps its state (docs/wrap.md, "Shared sessions"): the shared sessions'
database, and the remote servers' tokens beside it.

The state directory is ``--state-dir``, else ``$ASSAY_STATE_DIR``, else
``$XDG_STATE_HOME/assay``, else ``~/.local/state/assay``; the database is ``sessions.db`` in it.
The directory is private to its user: created with mode 0700, and refused when it is not a
directory, is owned by another user (also through a symlink), or is group or world writable
(another user could then replace the database and steer the decisions of every wrap).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

__all__ = ["DB_NAME", "db_path", "ensure_state_dir", "state_dir"]

DB_NAME = "sessions.db"


def state_dir(option: str | None, env: Mapping[str, str]) -> str:
    """The state directory: ``option`` (``--state-dir``), else ``ASSAY_STATE_DIR``, else
    ``$XDG_STATE_HOME/assay`` (an absolute ``XDG_STATE_HOME`` only, as the XDG spec says), else
    ``~/.local/state/assay``. Blank values count as absent."""
    if option is not None and option.strip():
        return option
    value = env.get("ASSAY_STATE_DIR", "")
    if value.strip():
        return value
    xdg = env.get("XDG_STATE_HOME", "")
    if xdg.strip() and os.path.isabs(xdg):
        return os.path.join(xdg, "assay")
    home = env.get("HOME", "")
    if not home.strip() or not os.path.isabs(home):
        home = os.path.expanduser("~")
    return os.path.join(home, ".local", "state", "assay")


def db_path(directory: str) -> str:
    """The database file of the state directory ``directory``."""
    return os.path.join(directory, DB_NAME)


def ensure_state_dir(path: str) -> None:
    """Create ``path`` (and its parents) with mode 0700, or check the one that exists. Raises
    :class:`StoreError` (a one-line cause) when it cannot be made or is not safe to use."""
    from assay.policy.storeapi import StoreError  # (here: state_dir, on wrap's start-up path, imports nothing)

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the state directory {path}: {exc.strerror or exc}") from None
        try:
            st = os.lstat(path)
        except OSError as exc:
            raise StoreError(f"cannot read the state directory {path}: {exc.strerror or exc}") from None
    except OSError as exc:
        raise StoreError(f"cannot read the state directory {path}: {exc.strerror or exc}") from None
    where = path
    if stat.S_ISLNK(st.st_mode):
        try:
            st = os.stat(path)
        except OSError as exc:
            raise StoreError(
                f"the state directory {path} is a symlink that cannot be followed: {exc.strerror or exc}"
            ) from None
        where = f"{path} (a symlink to {os.path.realpath(path)})"
    if not stat.S_ISDIR(st.st_mode):
        raise StoreError(f"the state directory {where} exists and is not a directory")
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is not None and st.st_uid != uid:
        raise StoreError(f"the state directory {where} belongs to another user (uid {st.st_uid}); use --state-dir")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise StoreError(
            f"the state directory {where} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o});"
            " chmod 700 it or use --state-dir"
        )
