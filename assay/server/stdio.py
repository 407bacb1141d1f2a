"""The trio shell around :class:`~assay.server.protocol.ServerProtocol` (docs/server.md,
"Policy path jail").

One nursery holds the reader and the handler. The reader pulls stdin through a bounded framer
(a huge line is discarded as it arrives, never held whole) and passes each chunk's frames over a
zero-buffer channel, so lines are handled strictly in order and memory stays bounded.

A tool call whose policy is already parsed is answered inline, without a thread hand-off. A
call that must read and parse a policy runs in a worker thread inside a cancel scope of
ASSAY_MCP_TIMEOUT_MS; a late result from an abandoned worker is dropped, never answered. Such a
worker cannot block for good: the jail opens only regular files, without blocking, so what is
left is a bounded read and a bounded parse.

The shell does all the writing: replies to stdout, and the log lines the protocol queued to
stderr, one write each per batch of frames.
"""

from __future__ import annotations

import errno
import os
import time
from typing import Any

import trio

from assay.server.config import ServerConfig, config_from_env
from assay.server.context import NeedsWorker
from assay.server.framing import LineFramer
from assay.server.log import TARGET_SERVER, Logger
from assay.server.protocol import PendingCall, ServerProtocol

__all__ = ["serve_stdio", "serve"]

_CHUNK = 1 << 16
_BATCH = 64  # replies held back at most before a write, so a long pipelined burst still streams


class _ClientGone(Exception):
    pass


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
        except Exception:  # any failure, never its text
            failed = True
    if scope.cancelled_caught:
        return proto.complete(call, timed_out=True)
    return proto.complete(call, payload, failed=failed)


def _run_inline(proto: ServerProtocol, call: PendingCall) -> bytes | None:
    """The reply of a call answered inline, or None when it needs a worker."""
    if call.inline is None:
        return None
    t0 = time.monotonic()
    try:
        payload = call.inline()
    except NeedsWorker:
        return None
    except Exception:
        return proto.complete(call, failed=True)
    if time.monotonic() - t0 > proto.config.timeout_ms / 1000:
        return proto.complete(call, timed_out=True)  # the deadline holds inline too
    return proto.complete(call, payload)


async def serve(proto: ServerProtocol, read_fd: int = 0, write_fd: int = 1, log_fd: int = 2) -> int:
    framer = LineFramer(proto.config.max_msg_bytes)
    send, receive = trio.open_memory_channel[list[Any]](0)
    read_limiter = trio.CapacityLimiter(1)  # stdin never waits behind tool workers
    tool_limiter = trio.CapacityLimiter(64)
    pollable = True

    async def read_chunk() -> bytes:
        nonlocal pollable
        if pollable:
            try:
                await trio.lowlevel.wait_readable(read_fd)
            except OSError:  # a regular file or /dev/null cannot be polled: read in a thread
                pollable = False
            else:
                return os.read(read_fd, _CHUNK)
        return await trio.to_thread.run_sync(os.read, read_fd, _CHUNK, abandon_on_cancel=True, limiter=read_limiter)

    async def reader() -> None:
        async with send:
            while True:
                try:
                    chunk = await read_chunk()
                except OSError:
                    chunk = b""
                frames = framer.feed(chunk) if chunk else framer.eof()
                if frames:
                    await send.send(frames)
                if not chunk:
                    return

    def flush(out: list[bytes]) -> None:
        logs = proto.pending_log()
        if logs:
            try:
                _write_all(log_fd, logs)
            except OSError:
                pass  # a closed stderr must never take the server down
        if out:
            data = b"".join(out)
            out.clear()
            try:
                _write_all(write_fd, data)
            except OSError as exc:
                if exc.errno in (errno.EPIPE, errno.EBADF):
                    raise _ClientGone() from None
                raise

    async def handle() -> None:
        out: list[bytes] = []
        async with receive:
            async for frames in receive:
                for frame in frames:
                    try:
                        reply = proto.receive(frame)
                        if isinstance(reply, PendingCall):
                            call = reply
                            reply = _run_inline(proto, call)
                            if reply is None:
                                flush(out)  # everything before this call is answered first
                                reply = await _run_call(proto, call, tool_limiter)
                    except _ClientGone:
                        raise
                    except Exception:  # never let a bug in one line take the server down
                        proto.logger.event("ERROR", TARGET_SERVER, "internal_error")
                        continue
                    if reply is not None:
                        out.append(reply)
                        if len(out) >= _BATCH:
                            flush(out)
                flush(out)
        flush(out)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        try:
            await handle()
        except _ClientGone:
            pass  # the client is gone: end quietly
        nursery.cancel_scope.cancel()
    return 0


def serve_stdio(policy_root: str, config: ServerConfig | None = None, logger: Logger | None = None) -> int:
    """Serve MCP on stdin/stdout with ``policy_root`` (canonical) as the jail; return the exit code."""

    if config is None:
        config = config_from_env(os.environ)
    if logger is None:
        logger = Logger(None, config.log_filter, buffered=True)
    proto = ServerProtocol(policy_root, config, logger)
    # Load the policy engine (YAML, jsonschema) now, once the startup checks have passed, so a
    # first tool call does not spend its dispatch deadline on imports.
    import assay.policy  # noqa: F401
    import assay.policy.yamlio  # noqa: F401

    return trio.run(serve, proto)
