"""`assay mcp auth login|list|logout` (docs/auth.md): OAuth logins to remote MCP servers.

A usage error (a bad URL or option) is one `assay: error: ...` line, exit 2; a failure of the
work (a server that cannot be used, a flow that failed, a token file that cannot be read or
removed) one `fatal: ...` line, exit 2, and "not logged in" (logout of nothing) exit 1.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated, Any, Literal

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import fatal, one_line
from assay.cli.output import printable as _safe
from assay.cli.output import aligned, local_time, write_out

_STATE_HELP = "The state directory (default: $ASSAY_STATE_DIR, else $XDG_STATE_HOME/assay, else ~/.local/state/assay)."


def _error(message: str, code: int) -> int:
    sys.stderr.write(f"assay: error: {one_line(message)}\n")
    return code


def _state(state_dir: str | None) -> str:
    from assay.statedir import state_dir as resolve

    return resolve(state_dir, os.environ)


def _when(stamp: Any, now: float) -> str:
    if stamp is None:
        return "-"
    text = local_time(stamp)
    return f"{text} (expired)" if text != "?" and float(stamp) <= now else text


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    auth = cyclopts.App(
        name="auth", help="Log in to remote MCP servers that need OAuth (docs/auth.md).", help_format="plaintext"
    )
    mcp.command(auth)

    @auth.command(name="login")
    def login_command(
        url: str,
        /,
        *,
        scope: Annotated[str | None, Parameter(name="--scope")] = None,
        client_id: Annotated[str | None, Parameter(name="--client-id")] = None,
        client_secret_file: Annotated[str | None, Parameter(name="--client-secret-file")] = None,
        client_secret_env: Annotated[str | None, Parameter(name="--client-secret-env")] = None,
        private_key: Annotated[str | None, Parameter(name="--private-key")] = None,
        client_metadata_url: Annotated[str | None, Parameter(name="--client-metadata-url")] = None,
        grant: Annotated[Literal["authorization-code", "client-credentials", "id-jag"], Parameter(name="--grant")] = (
            "authorization-code"
        ),
        issuer: Annotated[str | None, Parameter(name="--issuer")] = None,
        id_token_file: Annotated[str | None, Parameter(name="--id-token-file")] = None,
        id_token_env: Annotated[str | None, Parameter(name="--id-token-env")] = None,
        idp_issuer: Annotated[str | None, Parameter(name="--idp-issuer")] = None,
        idp_client_id: Annotated[str | None, Parameter(name="--idp-client-id")] = None,
        idp_client_secret_file: Annotated[str | None, Parameter(name="--idp-client-secret-file")] = None,
        idp_client_secret_env: Annotated[str | None, Parameter(name="--idp-client-secret-env")] = None,
        no_browser: Annotated[bool, Parameter(name="--no-browser", negative=())] = False,
        state_dir: Annotated[str | None, Parameter(name="--state-dir")] = None,
    ) -> int:
        """Log in to the MCP server at URL: connect, and answer its OAuth challenge (a browser, client credentials, or an enterprise ID token).

        Parameters
        ----------
        url
            The server's MCP endpoint (Streamable HTTP).
        scope
            Scopes to ask for as well as what the server asks for (space-separated).
        client_id
            A client registered beforehand (else the client registers itself, or uses --client-metadata-url).
        client_secret_file
            A file holding the client secret (secrets are never given on the command line).
        client_secret_env
            A variable holding the client secret.
        private_key
            A PEM private key file (RSA, EC P-256/384/521 or Ed25519): the client authenticates with private_key_jwt.
        client_metadata_url
            An https URL of this client's metadata document, used as its client id where the server supports it.
        grant
            authorization-code (a browser), client-credentials (machine to machine), or id-jag (an enterprise identity provider's ID token).
        issuer
            The authorization server the credentials belong to; they are sent to no other.
        id_token_file
            With --grant id-jag: a file holding the identity provider's ID token (read again for each new token).
        id_token_env
            With --grant id-jag: a variable holding the identity provider's ID token.
        idp_issuer
            With --grant id-jag: the identity provider's issuer URL (its token endpoint is discovered).
        idp_client_id
            With --grant id-jag: this client's id at the identity provider.
        idp_client_secret_file
            With --grant id-jag: a file holding this client's secret at the identity provider.
        idp_client_secret_env
            With --grant id-jag: a variable holding this client's secret at the identity provider.
        no_browser
            Print the authorization URL instead of opening a browser.
        state_dir
            {state}
        """
        import trio

        from assay.auth.login import LoginError, LoginOptions, login

        opts = LoginOptions(
            url=url,
            scope=scope,
            client_id=client_id,
            client_secret_file=client_secret_file,
            client_secret_env=client_secret_env,
            client_metadata_url=client_metadata_url,
            grant=grant,
            private_key=private_key,
            issuer=issuer,
            id_token_file=id_token_file,
            id_token_env=id_token_env,
            idp_issuer=idp_issuer,
            idp_client_id=idp_client_id,
            idp_client_secret_file=idp_client_secret_file,
            idp_client_secret_env=idp_client_secret_env,
            no_browser=no_browser,
        )
        try:
            line = trio.run(lambda: login(opts, state=_state(state_dir), environ=dict(os.environ)))
        except LoginError as exc:
            return _error(str(exc), 2) if exc.usage else fatal(str(exc), 2)
        write_out(_safe(line) + "\n")
        return 0

    @auth.command(name="list")
    def list_command(
        *,
        state_dir: Annotated[str | None, Parameter(name="--state-dir")] = None,
        json: Annotated[bool, Parameter(name="--json", negative=())] = False,
    ) -> int:
        """List the stored logins: URL, expiry, scopes, whether a refresh token is held, the issuer (never a token).

        Parameters
        ----------
        state_dir
            {state}
        json
            One JSON object per line instead of the table.
        """
        from assay.shells.upstream_http.tokens import TokenFileError, records, summary

        now = time.time()
        rows: list[dict[str, Any]] = []
        try:
            for path, record in records(_state(state_dir)):
                if isinstance(record, TokenFileError):
                    sys.stderr.write(f"assay: warning: {one_line(record)}\n")
                else:
                    rows.append(summary(record, now))
        except TokenFileError as exc:
            return fatal(str(exc), 2)
        if json:
            import json as j

            write_out("".join(j.dumps(r, ensure_ascii=True, separators=(",", ":")) + "\n" for r in rows))
            return 0
        if not rows:
            sys.stderr.write("no stored logins\n")
            return 0
        table = [("URL", "EXPIRES", "SCOPE", "REFRESH", "GRANT", "ISSUER")]
        for r in rows:
            table.append(
                (
                    _safe(str(r["url"])),
                    _when(r["expires_at"], now),
                    _safe(r["scope"] or "-"),
                    "yes" if r["refresh_token"] else "no",
                    _safe(r["grant"]),
                    _safe(r["issuer"] or "-"),
                )
            )
        write_out("".join(line + "\n" for line in aligned(table)))
        return 0

    @auth.command(name="logout")
    def logout_command(
        url: str,
        /,
        *,
        state_dir: Annotated[str | None, Parameter(name="--state-dir")] = None,
    ) -> int:
        """Forget the stored login of URL (the token file is deleted).

        Parameters
        ----------
        url
            The server's MCP endpoint, as given to login.
        state_dir
            {state}
        """
        from assay.shells.upstream_http.tokens import TokenFileError, delete, normalize_url

        try:
            key = normalize_url(url)
        except ValueError as exc:
            return _error(str(exc), 2)
        try:
            done = delete(_state(state_dir), key)
        except TokenFileError as exc:
            return fatal(str(exc), 2)
        if not done:
            return fatal(f"not logged in to {_safe(url)}", 1)
        write_out(f"logged out of {_safe(url)}\n")
        return 0

    for command in (login_command, list_command, logout_command):
        if command.__doc__:
            command.__doc__ = command.__doc__.replace("{state}", _STATE_HELP)
