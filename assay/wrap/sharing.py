"""Which shared agent session a wrap run joins, and its store (docs/wrap.md, "Shared sessions").

The shell side of :mod:`assay.policy.shared`: reads ``--shared-session`` (or
``ASSAY_SHARED_SESSION``; default ``client``), ``--state-dir`` (or ``ASSAY_STATE_DIR``) and
``--session-lock-timeout``, and builds the session key and the store of the state directory
(:func:`assay.store.store.open_store`, the one ``assay mcp session`` uses). A policy without
flow rules, rate limits or session totals never opens the database (it is not even created).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from assay.wrap.options import DEFAULT_SHARED_SESSION, SHARED_SESSION_ENV

if TYPE_CHECKING:
    from assay.policy.model import Policy
    from assay.policy.storeapi import SessionKey, Store

__all__ = ["SharingError", "shared_for"]


class SharingError(ValueError):
    """A bad ``--shared-session`` or ``--session-lock-timeout`` value (one line)."""


def shared_for(
    policy: Policy,
    spec: str | None,
    state_dir: str | None,
    lock_timeout: float,
    env: Mapping[str, str],
    warn: Callable[[str], None],
) -> tuple[SessionKey | None, tuple[Store, SessionKey] | None]:
    """The run's session key (``None``: ``none``) and, when the policy shares anything, the
    store with the key. Raises :class:`SharingError` on a bad option value."""
    if not (math.isfinite(lock_timeout) and lock_timeout >= 0):
        raise SharingError("--session-lock-timeout must be a non-negative number of seconds")
    if spec is None:
        spec = env.get(SHARED_SESSION_ENV) or DEFAULT_SHARED_SESSION
    from assay.store.keys import session_key

    try:
        key = session_key(spec, env)
    except ValueError as exc:
        raise SharingError(f"--shared-session: {exc}") from None
    from assay.policy.shared import shares_state

    if key is None or not shares_state(policy):
        return key, None
    from assay.statedir import state_dir as resolve
    from assay.store.store import open_store

    # the store creates the directory (0700) when it first opens the file; a directory it cannot
    # use is a StoreError then: the calls that need it are denied, with one stderr line
    return key, (open_store(resolve(state_dir, env), timeout=lock_timeout), key)
