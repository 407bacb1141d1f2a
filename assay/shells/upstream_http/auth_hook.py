"""The OAuth layer as wrap uses it (docs/auth.md, "What wrap does with a login"): the ``httpx2``
auth of a remote target, and the exception that means only a person can go on."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from assay.shells.upstream_http.target import Target

__all__ = ["auth_for"]


def auth_for(
    target: Target, *, state_dir: str | None, environ: Mapping[str, str], login: str, warn: Callable[[str], None]
) -> tuple[Any, tuple[type[BaseException], ...]]:
    """(the auth to give the HTTP client, the exceptions that mean a login is needed). A stored
    login that cannot be used at all (a bad token file) is a RemoteStartError: its one line,
    before the client is read. With ``login`` ``auto`` and a browser that can be opened
    (docs/auth.md, "Where a browser can be opened"), the auth logs in itself when it must."""
    from assay.auth.authorizer import Authorizer
    from assay.auth.browser import can_open
    from assay.auth.lines import NeedsLogin
    from assay.auth.wrapauth import WrapAuth
    from assay.shells.upstream_http.connect import RemoteStartError
    from assay.statedir import state_dir as resolve

    interactive = login == "auto" and can_open(environ, sys.platform)
    try:
        authorizer = Authorizer(
            target.url,
            resolve(state_dir, environ),
            environ,
            interactive=interactive,
            static=target.header_sources,
            ca_file=target.ca_file,
            say=warn,
        )
    except NeedsLogin as exc:
        raise RemoteStartError(str(exc)) from None
    except ValueError as exc:  # a URL the token store cannot key on
        raise RemoteStartError(str(exc)) from None
    return WrapAuth(authorizer), (NeedsLogin,)
