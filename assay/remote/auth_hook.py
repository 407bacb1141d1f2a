"""The OAuth layer as wrap uses it (docs/auth.md, "What wrap does"): the ``httpx2`` auth for a
server URL, and the exception that means only ``assay mcp auth login`` can go on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["auth_for"]


def auth_for(url: str, state_dir: str | None, environ: Mapping[str, str]) -> tuple[Any, tuple[type[BaseException], ...]]:
    """(the auth to give the HTTP client or None, the exceptions that mean a login is needed).
    A stored login that cannot be used at all (a bad token file, a missing client secret) is a
    RemoteStartError: its one line, before the client is read."""
    from assay.remote.connect import RemoteStartError
    from assay.remote.oauth import NeedsLogin, auth_for_wrap

    try:
        auth = auth_for_wrap(url, state_dir=state_dir, environ=environ)
    except NeedsLogin as exc:
        raise RemoteStartError(str(exc)) from None
    return auth, (NeedsLogin,)
