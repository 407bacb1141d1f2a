"""The trio shell of `assay mcp tools` (docs/tools.md, "How it talks to a server"): start one
server through :mod:`assay.proc`, hold the :class:`~assay.mcpclient.protocol.ListingClient`
conversation under a deadline, then close its stdin and end it. Never hangs, never leaves a
process: the child is in its own process group, dies with us, and is stopped (SIGTERM, SIGKILL,
reaped, shielded) whatever happened.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import trio

from assay.framing import BoundedLineSplitter
from assay.mcpclient.protocol import Listing, ListingClient, ListingError

if TYPE_CHECKING:
    from assay.proc import Child

__all__ = ["DEFAULT_TIMEOUT_S", "MAX_LINE_BYTES", "list_tools"]

DEFAULT_TIMEOUT_S = 30.0
MAX_LINE_BYTES = 64 * 1024 * 1024  # wrap's frame limit (docs/wrap.md, "Options", --max-frame-bytes)
EXIT_GRACE_S = 2.0  # after stdin closes, how long a server may take to leave on its own
TERM_GRACE_S = 1.0
STDERR_TAIL = 4096


_DIED = ListingError("died")  # the server left before the listing was complete (said with its status)


class _TooLong:
    def __init__(self, size: int, digest: str | None = None) -> None:
        self.size = size


def _last_line(tail: bytearray) -> str:
    from assay.mcpclient.tooldefs import safe

    lines = [ln for ln in bytes(tail).decode("utf-8", "replace").splitlines() if ln.strip()]
    return safe(lines[-1], 200) if lines else ""


async def list_tools(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Listing:
    """The tools the server ``argv`` lists. Raises :class:`ListingError` (one line) when it
    cannot be started, stalls past ``timeout`` seconds, dies, or answers something unusable."""
    from assay import proc

    try:
        child = proc.spawn(argv, env=env, cwd=cwd, own_group=True, die_with_parent=True)
    except proc.ProgramNotFound as exc:
        raise ListingError(f"cannot start {argv[0]}: program not found ({exc.strerror})") from None
    except proc.SpawnError as exc:
        raise ListingError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
    client = ListingClient()
    tail = bytearray()
    problem: ListingError | None = None
    try:
        with trio.move_on_after(timeout) as scope:
            problem = await _converse(child, client, tail, max_line_bytes)
        if scope.cancelled_caught and problem is None:
            problem = ListingError(f"no answer to {client.waiting_for} within {timeout:g} s")
    finally:
        code = await _end(child)
    if problem is _DIED:
        how = "exited" if code is None or code >= 0 else "was killed"
        status = "" if code is None else (f" with status {code}" if code >= 0 else f" by signal {-code}")
        said = _last_line(tail)
        problem = ListingError(
            f"the server {how}{status} before answering {client.waiting_for}"
            + (f" (its last stderr line: {said})" if said else "")
        )
    if problem is not None:
        raise problem
    return client.listing


async def _converse(child: Child, client: ListingClient, tail: bytearray, cap: int) -> ListingError | None:
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    stdin, stdout, stderr = child.stdin, child.stdout, child.stderr
    outcome: list[ListingError | None] = []

    async def send(lines: list[bytes]) -> None:
        for line in lines:
            await stdin.send_all(line)

    async def talk(cancel: trio.CancelScope) -> None:
        splitter: BoundedLineSplitter[_TooLong] = BoundedLineSplitter(cap, _TooLong)
        try:
            await send([client.start()])
            while not client.done:
                data = await stdout.receive_some(65536)
                if not data:
                    break
                for line in splitter.feed(data):
                    if isinstance(line, _TooLong):
                        raise client.too_long(line.size)
                    await send(client.receive(line))
                    if client.done:
                        break
        except ListingError as exc:
            outcome.append(exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the server went away: said below
        if not outcome and not client.done:
            await child.wait_exit()  # its status is read once it is reaped (list_tools)
            outcome.append(_DIED)
        cancel.cancel()

    async def drain_stderr() -> None:
        while True:
            try:
                data = await stderr.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return
            if not data:
                return
            tail.extend(data)
            del tail[:-STDERR_TAIL]

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain_stderr)
        with trio.CancelScope() as scope:
            await talk(scope)
        nursery.cancel_scope.cancel()
    return outcome[0] if outcome else None


async def _end(child: Child) -> int | None:
    """Close stdin (the MCP way to ask a stdio server to leave), wait briefly, then stop the
    whole group and reap, shielded."""
    with trio.CancelScope(shield=True):
        if child.stdin is not None:
            try:
                await child.stdin.aclose()
            except (trio.BrokenResourceError, OSError):
                pass
        with trio.move_on_after(EXIT_GRACE_S):
            await child.wait_exit()
        code = await child.stop(term_grace=TERM_GRACE_S)
        await child.aclose_streams()
    return code


def environment(extra: Mapping[str, str] | None) -> dict[str, str] | None:
    """This process's environment with ``extra`` on top (what a client gives a server)."""
    if not extra:
        return None
    return {**os.environ, **extra}
