"""The trio shell around :class:`~assay.server.protocol.ServerProtocol` (spec/server.md §2, §5).

One nursery holds the reader and the handler. The reader pulls stdin through a bounded framer
(a huge line is discarded as it arrives, never held whole) and passes frames over a zero-buffer
channel, so lines are handled strictly in order (T3). Each tool dispatch runs in a worker thread
inside a cancel scope of ASSAY_MCP_TIMEOUT_MS: blocking reads and YAML parsing cannot outlast
the deadline, and a late result from an abandoned thread is dropped, never answered (F3).
"""

from __future__ import annotations

import errno
import os

import trio

from assay.server.framing import LineFramer, Oversize
from assay.server.log import TARGET_SERVER
from assay.server.protocol import PendingCall, ServerProtocol

__all__ = ["serve_stdio", "serve"]

_CHUNK = 1 << 16


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


async def _run_call(proto: ServerProtocol, call: PendingCall, limiter: trio.CapacityLimiter) -> bytes:
    timeout = proto.config.timeout_ms / 1000
    payload = None
    failed = False
    with trio.move_on_after(timeout) as scope:
        try:
            payload = await trio.to_thread.run_sync(call.work, abandon_on_cancel=True, limiter=limiter)
        except Exception:  # F2: any failure, never its text
            failed = True
    if scope.cancelled_caught:
        return proto.complete(call, timed_out=True)
    return proto.complete(call, payload, failed=failed)


async def serve(proto: ServerProtocol, read_fd: int = 0, write_fd: int = 1) -> int:
    framer = LineFramer(proto.config.max_msg_bytes)
    send, receive = trio.open_memory_channel[bytes | Oversize](0)
    read_limiter = trio.CapacityLimiter(1)  # stdin never waits behind abandoned tool threads
    tool_limiter = trio.CapacityLimiter(64)

    async def reader() -> None:
        async with send:
            while True:
                try:
                    chunk = await trio.to_thread.run_sync(
                        os.read, read_fd, _CHUNK, abandon_on_cancel=True, limiter=read_limiter
                    )
                except OSError:
                    chunk = b""
                frames = framer.feed(chunk) if chunk else framer.eof()
                for frame in frames:
                    await send.send(frame)
                if not chunk:
                    return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        async with receive:
            async for frame in receive:
                try:
                    out = proto.receive(frame)
                    if isinstance(out, PendingCall):
                        out = await _run_call(proto, out, tool_limiter)
                except Exception:  # never let a bug in one line take the server down
                    proto.logger.event("ERROR", TARGET_SERVER, "internal_error")
                    continue
                if out is None:
                    continue
                try:
                    _write_all(write_fd, out)
                except OSError as exc:
                    if exc.errno in (errno.EPIPE, errno.EBADF):
                        nursery.cancel_scope.cancel()  # the client is gone: end quietly
                        return 0
                    raise
    return 0


def serve_stdio(policy_root: str, config=None, logger=None) -> int:
    """Serve MCP on stdin/stdout with ``policy_root`` (canonical) as the jail; return the exit code."""
    import sys

    from assay.server.config import config_from_env
    from assay.server.log import Logger

    if config is None:
        config = config_from_env(os.environ)
    if logger is None:
        logger = Logger(sys.stderr.buffer, config.log_filter)
    proto = ServerProtocol(policy_root, config, logger)
    # Load the policy engine (YAML, jsonschema) now, once the startup checks have passed, so a
    # first tool call does not spend its dispatch deadline on imports.
    import assay.policy  # noqa: F401
    import assay.policy.yamlio  # noqa: F401

    return trio.run(serve, proto)
