"""Bounded runs: a child under a wall-clock deadline with capped outputs (docs/library.md,
"Running child processes")."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import trio

from assay.proc.spawning import DEVNULL, PIPE, spawn

__all__ = ["BoundedResult", "read_capped", "run_bounded"]


async def read_capped(stream: trio.abc.ReceiveStream, cap: int, sink: bytearray) -> bool:
    """Read ``stream`` into ``sink`` until EOF or ``cap`` bytes, then close it.

    Closing the read end at the cap means a child that keeps writing gets EPIPE/SIGPIPE instead
    of blocking on a full pipe. Returns True when the cap was hit (output truncated).
    """
    truncated = False
    try:
        while len(sink) < cap:
            chunk = await stream.receive_some(max(4096, min(65536, cap - len(sink))))
            if not chunk:
                break
            room = cap - len(sink)
            if len(chunk) > room:
                sink += chunk[:room]
                truncated = True
                break
            sink += chunk
        else:
            truncated = True
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()
    return truncated


@dataclass(frozen=True)
class BoundedResult:
    """What a bounded run produced. ``returncode`` is None exactly when ``timed_out``."""

    pid: int
    timed_out: bool
    returncode: int | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool

    @property
    def exit_code(self) -> int | None:
        """The exit status with a death by signal counted as 1 (docs/library.md, "Running child processes")."""
        if self.returncode is None:
            return None
        return 1 if self.returncode < 0 else self.returncode


async def run_bounded(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout: float,
    stdout_cap: int,
    stderr_cap: int,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> BoundedResult:
    """Run a child with stdin at EOF, both outputs piped and capped, under a wall-clock deadline.

    The run completes only when the child exited *and* both readers finished before the
    deadline (docs/library.md, "Running child processes"); otherwise the direct child is SIGKILLed and reaped and the
    result says ``timed_out``. Raises :class:`ProgramNotFound` / :class:`SpawnError` on spawn.
    """
    deadline = trio.current_time() + timeout
    child = spawn(argv, stdin=DEVNULL, stdout=PIPE, stderr=PIPE, env=env, cwd=cwd)
    out, err = bytearray(), bytearray()
    flags = {"out": False, "err": False}
    completed = False
    try:
        with trio.move_on_at(deadline):

            async def pump(name: str, stream: trio.abc.ReceiveStream | None, sink: bytearray, cap: int) -> None:
                assert stream is not None  # both outputs are piped
                flags[name] = await read_capped(stream, cap, sink)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump, "out", child.stdout, out, stdout_cap)
                nursery.start_soon(pump, "err", child.stderr, err, stderr_cap)
                nursery.start_soon(child.wait)
            completed = True
    finally:
        if not completed:
            await child.kill_and_reap()
        await child.aclose_streams()
    return BoundedResult(
        pid=child.pid,
        timed_out=not completed,
        returncode=child.returncode if completed else None,
        stdout=bytes(out),
        stderr=bytes(err),
        stdout_truncated=flags["out"],
        stderr_truncated=flags["err"],
    )
