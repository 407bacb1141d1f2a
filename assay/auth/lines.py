"""What the OAuth client says when it cannot go on (sans-IO; docs/auth.md, "What wrap does with
a login", "Messages").

:class:`NeedsLogin` is the one exception wrap sees: its text is one line that leads somewhere,
usually the ``assay mcp auth login`` command that would fix it (:func:`login_command`, rebuilt
from the record: the sources of secrets, never a secret). :func:`static_refused` is the line of
a 401 to a request that carried a static credential (``--header``, ``--header-env``): which
header was refused and where its value comes from; ``auth login`` is suggested only when the
server advertises OAuth.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from assay.shells.upstream_http.target import shown_url
from assay.terminal import printable

__all__ = ["NeedsLogin", "login_command", "static_refused", "unadvertised"]


class NeedsLogin(Exception):
    """Wrap cannot go on without a person; ``str()`` is the one line to print (whatever a server
    put in it, printable: docs/compatibility.md, "Whole toolkit")."""

    def __init__(self, text: str) -> None:
        super().__init__(printable(text))


_FLAGS = (
    ("client_id", "--client-id"),
    ("secret_file", "--client-secret-file"),
    ("secret_env", "--client-secret-env"),
    ("private_key", "--private-key"),
    ("client_metadata_url", "--client-metadata-url"),
    ("issuer", "--issuer"),
    ("id_token_file", "--id-token-file"),
    ("id_token_env", "--id-token-env"),
    ("idp_issuer", "--idp-issuer"),
    ("idp_client_id", "--idp-client-id"),
    ("idp_secret_file", "--idp-client-secret-file"),
    ("idp_secret_env", "--idp-client-secret-env"),
)
_GRANTS = {"client_credentials": "client-credentials", "id_jag": "id-jag"}


def login_command(url: str, *, scope: str | None = None, grant: Mapping[str, Any] | None = None) -> str:
    """The `assay mcp auth login` command line that would log in again to ``url`` as before."""
    words = ["assay", "mcp", "auth", "login", url]
    grant = grant or {}
    kind = _GRANTS.get(str(grant.get("kind")))
    if kind:
        words += ["--grant", kind]
    for key, flag in _FLAGS:
        value = grant.get(key)
        if value:
            words += [flag, str(value)]
    if scope:
        words += ["--scope", scope]
    return " ".join(shlex.quote(w) for w in words)


def _source(variable: str | None) -> str:
    if variable:
        return f"its value comes from {variable} in wrap's environment (this entry's env)"
    return "its value is written on wrap's command line (--header)"


def static_refused(url: str, headers: Sequence[tuple[str, str | None]], *, oauth: bool) -> str:
    """A 401 to a request with the static headers ``headers`` ((name, the variable its value
    comes from, or None))."""
    named = [h for h in headers if h[0].lower() == "authorization"] or list(headers)
    if len(named) == 1:
        name, variable = named[0]
        text = f"{shown_url(url)} refused the {name} header (HTTP 401); {_source(variable)}"
    else:
        parts = [f"{name} ({variable or 'the command line'})" for name, variable in named]
        text = f"{shown_url(url)} refused the request (HTTP 401) with the headers {', '.join(parts)}"
    if oauth:
        text += f"; the server also takes an OAuth login: run {login_command(url)}"
        if any(n.lower() == "authorization" for n, _ in headers):
            text += " and drop the Authorization header"
    return text


def unadvertised(url: str) -> str:
    """A 401 from a server that advertises no OAuth (no protected-resource metadata)."""
    return (
        f"{shown_url(url)} refused the request (HTTP 401) and advertises no OAuth login (no protected-resource "
        "metadata): it needs a credential; give it with --header-env Name=VARIABLE"
    )
