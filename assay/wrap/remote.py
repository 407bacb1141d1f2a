"""The remote side of ``assay mcp wrap --url`` as :func:`assay.wrap.run.run_wrap` calls it
(docs/remote.md): the checked target, the banner, and the run with a remote server as the
relay's child. Imported only on the ``--url`` path: nothing of HTTP loads for a stdio wrap.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import trio

from assay import proc
from assay.shells.upstream_http.target import Target
from assay.shells.stdio.relay import Relay, RunResult
from assay.wrap.errors import WrapError
from assay.wrap.options import TRANSPORTS, WrapOptions

if TYPE_CHECKING:
    from assay.shells.upstream_http.http import HttpServer

__all__ = ["banner", "input_ended", "run", "target_of"]


def target_of(config: WrapOptions, environ: Mapping[str, str]) -> Target:
    """The checked ``--url`` target (docs/remote.md, "Options"); a bad one is a WrapError."""
    from assay.shells.upstream_http.target import TargetError, target_from

    if config.transport not in TRANSPORTS:
        raise WrapError(f"--transport must be one of {', '.join(TRANSPORTS)}")
    if not (math.isfinite(config.connect_timeout) and config.connect_timeout > 0):
        raise WrapError("--connect-timeout must be a positive number of seconds")
    assert config.url is not None
    try:
        return target_from(
            config.url,
            transport=config.transport,
            headers=config.header,
            header_env=config.header_env,
            ca_file=config.ca_file,
            allow_insecure_http=config.allow_insecure_http,
            environ=environ,
            bearer_env=config.bearer_env,
            header_env_if_set=config.header_env_if_set,
        )
    except TargetError as exc:
        raise WrapError(str(exc)) from None


def banner(target: Target) -> str:
    """`[assay] wrapping remote server: <URL without its query> (<transport>)`."""
    from assay.shells.upstream_http.target import shown_url

    return f"[assay] wrapping remote server: {shown_url(target.url)} ({target.transport})"


async def input_ended(stream: object) -> None:
    """Return once the client's input has ended with nothing left in it, without reading it
    (docs/remote.md, "Start"): the start probe gives way to a client that is gone. Never
    returns while the client has written something (that waits for the relay), nor for an input
    whose end cannot be seen without reading (not a pipe, socket or terminal)."""
    import fcntl
    import struct
    import termios

    fileno = getattr(stream, "fileno", None)
    try:
        fd = fileno() if callable(fileno) else -1
        mode = os.fstat(fd).st_mode if fd >= 0 else 0
    except (OSError, ValueError):
        mode = 0
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        await trio.sleep_forever()
    try:
        await trio.lowlevel.wait_readable(fd)
        waiting = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:  # a device epoll does not take (/dev/null), an input FIONREAD does not know
        waiting = -1
    if waiting != 0:
        await trio.sleep_forever()


async def run(
    target: Target,
    config: WrapOptions,
    relay_for: Callable[[proc.ChildHandle], Relay],
    warn: Callable[[str], None],
    environ: Mapping[str, str],
    client_in: object = None,
) -> tuple[RunResult, str | None]:
    """Run the relay with the remote server as its child (docs/remote.md): the probe first (a
    server that cannot be used is a WrapError before the client is read), then the run; the
    second value is why the server was lost, if it was. ``client_in`` is the client's input,
    watched for its end during the probe."""
    from assay.shells.upstream_http.auth_hook import auth_for
    from assay.shells.upstream_http.connect import RemoteStartError, run_remote

    async def body(server: HttpServer) -> tuple[RunResult, str | None]:
        return await relay_for(server).run(), server.failure

    try:
        auth, needs_login = auth_for(target, state_dir=config.state_dir, environ=environ, login=config.login, warn=warn)
        return await run_remote(
            target,
            body,
            cap=config.max_frame_bytes,
            warn=warn,
            environ=environ,
            connect_timeout=config.connect_timeout,
            auth=auth,
            needs_login=needs_login,
            input_ended=lambda: input_ended(client_in),
        )
    except RemoteStartError as exc:
        raise WrapError(str(exc)) from None
