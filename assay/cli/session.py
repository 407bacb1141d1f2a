"""`assay mcp session list|reset` (docs/wrap.md, "Shared sessions"): the shared sessions of this
machine, from the store of the state directory (:func:`assay.store.store.open_store`, the one
wrap uses), or with ``--config`` the store a serve config names (its SQLite file or state
directory, or its Postgres database: docs/serve.md, "Several replicas"), through the store's
interface alone (:meth:`Store.sessions`, :meth:`Store.reset`).

Failures print one ``fatal: ...`` line and exit 2; nothing is created (no state directory, no
database) by either command.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Annotated, Any

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import fatal
from assay.cli.output import printable as _safe
from assay.cli.output import aligned, local_time, write_out

if TYPE_CHECKING:
    from assay.policy.storeapi import Store


class _Closing:
    """What the store needs closed after it (a Postgres database's pool), or nothing."""

    def __init__(self, database: Any = None) -> None:
        self.database = database

    async def aclose(self) -> None:
        if self.database is not None:
            await self.database.aclose()


def _store(state_dir: str | None, config: str | None = None) -> tuple[Store, _Closing]:
    """The store to read: the state directory's, or the serve config's (``config``; a config
    that cannot be used is :class:`_Exit`)."""
    if config is not None:
        return _config_store(config)
    from assay.statedir import state_dir as resolve
    from assay.store.store import open_store

    return open_store(resolve(state_dir, os.environ)), _Closing()


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _config_store(path: str) -> tuple[Store, _Closing]:
    """The store of the serve config at ``path`` (nothing opened yet); a config that cannot be
    read or is wrong: its lines on stderr and :class:`_Exit` 2."""
    from assay.cli.serve import load_config
    from assay.gateway.config import ConfigError
    from assay.inputs import InputFileError
    from assay.serve.run import stores_of

    try:
        loaded = load_config(path)
        store_for, database = stores_of(loaded, os.environ)
    except InputFileError as exc:
        raise _Exit(fatal(f"cannot read config {path}: {exc}")) from None
    except ConfigError as exc:
        for line in exc.problems:
            print(line, file=sys.stderr)
        raise _Exit(2) from None
    return store_for(), _Closing(database)


def _rows(store: Store, closing: _Closing) -> list[dict[str, Any]]:
    """The store's sessions as plain values (what --json prints, what the table shows)."""
    import msgspec
    import trio

    async def read() -> list[dict[str, Any]]:
        try:
            return [msgspec.to_builtins(row) for row in await store.sessions(time.time())]
        finally:
            await store.aclose()
            await closing.aclose()

    return trio.run(read)


def _reset(store: Store, closing: _Closing, key: str, who: str) -> bool:
    import trio

    async def reset() -> bool:
        try:
            return await store.reset(key, who, time.time())
        finally:
            await store.aclose()
            await closing.aclose()

    return trio.run(reset)


def _out(text: str) -> int:
    write_out(text)
    return 0


def _table(rows: list[dict[str, Any]]) -> list[str]:
    head = ("KEY", "CLIENT", "ALIVE", "SERVERS", "CALLS", "ARMED", "LAST")
    lines = [head]
    for r in rows:
        client = r["name"] if r["kind"] in ("named", "user") else r["process"] or "?"  # user: serve's subject
        servers = ",".join(f"{s['server']}({s['calls']})" for s in r["servers"]) or "-"
        lines.append(
            (
                _safe(r["key"]),
                _safe(client),
                {True: "yes", False: "no"}.get(r["alive"], "?"),
                _safe(servers),
                str(r["calls"]),
                _safe(",".join(r["armed"]) or "-"),
                local_time(r["last"]),
            )
        )
    return aligned(lines)


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    session = cyclopts.App(
        name="session", help="List and reset the shared sessions of this machine.", help_format="plaintext"
    )
    mcp.command(session)

    @session.command(name="list")
    def list_command(
        *,
        state_dir: Annotated[str | None, Parameter(name="--state-dir")] = None,
        config: Annotated[str | None, Parameter(name="--config")] = None,
        json: Annotated[bool, Parameter(name="--json", negative=())] = False,
    ) -> int:
        """List the shared sessions: key, client process or name, alive, servers, calls, armed rules, last activity.

        Parameters
        ----------
        state_dir
            The state directory (default: $ASSAY_STATE_DIR, else $XDG_STATE_HOME/assay, else ~/.local/state/assay).
        config
            A serve config (`assay mcp serve --config`): list the sessions of the store it names (SQLite or Postgres).
        json
            One JSON object per line instead of the table.
        """
        from assay.policy.storeapi import StoreError

        if state_dir is not None and config is not None:
            return fatal("--state-dir and --config name two stores: give one")
        try:
            store, closing = _store(state_dir, config)
        except _Exit as exc:
            return exc.code
        path = store.where
        try:
            rows = _rows(store, closing)
        except StoreError as exc:
            return fatal(exc.cause)
        if json:
            import json as j

            return _out("".join(j.dumps(r, ensure_ascii=True, separators=(",", ":")) + "\n" for r in rows))
        if not rows:
            sys.stderr.write(f"no shared sessions in {_safe(path)}\n")
            return 0
        return _out("\n".join(_table(rows)) + "\n")

    @session.command(name="reset")
    def reset_command(
        key: str,
        /,
        *,
        state_dir: Annotated[str | None, Parameter(name="--state-dir")] = None,
        config: Annotated[str | None, Parameter(name="--config")] = None,
    ) -> int:
        """Forget the flow and rate trackers and the totals of one shared session; its wraps see it at their next call.

        Parameters
        ----------
        key
            The session's key, as `assay mcp session list` shows it.
        state_dir
            The state directory (default: $ASSAY_STATE_DIR, else $XDG_STATE_HOME/assay, else ~/.local/state/assay).
        config
            A serve config (`assay mcp serve --config`): reset the session in the store it names (SQLite or Postgres).
        """
        import getpass

        from assay.policy.storeapi import StoreError

        if state_dir is not None and config is not None:
            return fatal("--state-dir and --config name two stores: give one")
        try:
            store, closing = _store(state_dir, config)
        except _Exit as exc:
            return exc.code
        path = store.where
        try:
            user = getpass.getuser()
        except (KeyError, OSError, ImportError):
            user = str(os.getuid()) if hasattr(os, "getuid") else "?"
        try:
            done = _reset(store, closing, key, f"assay mcp session reset by {user} (pid {os.getpid()})")
        except StoreError as exc:
            return fatal(exc.cause)
        if not done:
            return fatal(f"no such shared session: {_safe(key)} (in {_safe(path)})")
        return _out(f"reset {_safe(key)}: its trackers and totals start again at the next call\n")
