"""`assay mcp serve`'s run for the command line (docs/serve.md): identity, the gateway and the
HTTP front in one trio run; SIGTERM and SIGINT drain (no new requests, pending ones answered
within ``limits.drain_timeout``), a second signal stops at once.

The start line on stderr says where the gateway listens and who it lets in:
``assay: serving http://127.0.0.1:8787/mcp (2 upstreams; identity: API keys (3))``."""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assay.gateway.config import ServeConfig


def _warn(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _enough_files(config: ServeConfig) -> None:
    """Raise this process's soft limit on open files so ``limits.max_connections`` fit beside
    the upstreams' pipes (docs/serve.md, "Connections"); a line when the hard limit is lower."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return
    from assay.gateway.connections import FILES_RESERVE, files_limit

    wanted = config.limits.max_connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    to = files_limit(wanted, soft, hard)
    if to is None:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (to, hard))
    except (OSError, ValueError):
        to = soft
    if to < wanted + FILES_RESERVE:
        _warn(
            f"assay: limits.max_connections is {wanted} but this process may open only {to} files "
            f"(ulimit -n; {FILES_RESERVE} are kept for the rest): lower it, or raise the limit"
        )


async def serve(config: ServeConfig, listen: str | None) -> None:
    """The whole run: raises ConfigError for what cannot be served (exit 2)."""
    import trio

    from assay.auth.resource_shell import open_identity
    from assay.serve.run import run_serve
    from assay.shells.serve.server import Bound, serve_http

    _enough_files(config)
    identity = await open_identity(config, warn=_warn)
    stop = trio.Event()

    def started(bound: Bound) -> None:
        n = len(config.upstreams)
        _warn(f"assay: serving {bound.url} ({n} upstream{'s' if n != 1 else ''}; {identity.describe()})")

    async with trio.open_nursery() as nursery:

        async def signals() -> None:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
                async for _ in received:
                    if stop.is_set():
                        nursery.cancel_scope.cancel()  # a second signal: stop at once
                        return
                    _warn("assay: draining (a second signal stops at once)")
                    stop.set()

        nursery.start_soon(signals)
        await run_serve(
            config,
            listen=listen,
            authenticate=identity,
            serve_http=serve_http,
            warn=_warn,
            resource_metadata=identity.metadata,
            on_ready=started,
            stop=stop,
            report=_warn,
        )
        nursery.cancel_scope.cancel()


def serve_main(config: ServeConfig, listen: str | None) -> int:
    """Run the gateway until SIGTERM or SIGINT; the exit code (0, or 2 with one line per problem
    of what cannot be served)."""
    import trio

    from assay.gateway.config import ConfigError

    try:
        trio.run(serve, config, listen)
    except BaseException as exc:  # noqa: BLE001 - what cannot be served is one line, else re-raised
        leaf = _leaf(exc)
        if isinstance(leaf, ConfigError):
            for line in leaf.problems:
                _warn(line)
            return 2
        if isinstance(leaf, OSError):  # the address cannot be bound, a TLS file cannot be read
            where = listen or config.listen
            _warn(f"fatal: cannot serve on {where}: {leaf.strerror or leaf}")
            return 2
        raise
    return 0


def _leaf(exc: BaseException) -> BaseException:
    """The one exception inside nested exception groups of one exception each (trio's nurseries
    wrap what a task raised); ``exc`` itself otherwise."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
