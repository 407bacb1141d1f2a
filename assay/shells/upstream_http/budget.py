"""The bytes a remote wrap holds for its client, over every stream of the server, and the wait
of a stream while they are over the budget (docs/remote.md, "Answers and streams").

Two things are counted: what each stream holds of the message it is reading (an event, a JSON
body: a :class:`Holding` per stream), and the messages read whole that wait for the client
(queued for the relay). While the sum is over the budget, a stream does not read on
(:meth:`Budget.room`): the server's writes wait in the connection, as behind a full pipe. So a
client that stops reading stops the streams, and what wrap holds stays near the budget
whatever the server sends.

Waiting must never stop every stream for good: when nothing waits for the client (the queue is
empty) and the budget is taken by messages half read, the stream that began its message first
reads on to its end; its message then waits for the client, and the others wait with it. So
what is held stays under the budget plus one message (at most the cap) plus one read.

So that the process's memory follows what is held, not its peak, large blocks are given pages of
their own once a large message comes (:func:`_map_large_blocks`).
"""

from __future__ import annotations

import itertools

import trio

__all__ = ["Budget", "Holding"]

LARGE = 1 << 20  # a message this long switches the C heap to mapping large blocks (once)
MAP_FROM = 64 << 10  # blocks of this size and more are mapped, and unmapped when freed

_mapping = False


def _map_large_blocks() -> None:
    """From now on, blocks of :data:`MAP_FROM` bytes and more get pages of their own, given back
    to the system when they are freed. A message of megabytes is read in pieces of the
    connection's size and joined once read: with many streams at once, the pieces and the
    messages interleave on the C heap, which would keep what is freed between live blocks (and
    glibc's own threshold grows with the largest block freed, pulling messages onto the heap).
    Done once, at the first large message, through glibc's ``mallopt``; nothing where there is
    none. Measured: no difference in wrap's CPU per call for small messages."""
    global _mapping
    if _mapping:
        return
    _mapping = True
    import ctypes
    import ctypes.util

    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    m_mmap_threshold = -3  # glibc's M_MMAP_THRESHOLD
    mallopt(m_mmap_threshold, MAP_FROM)


class Holding:
    """What one stream holds now of the message it is reading."""

    __slots__ = ("nbytes", "since")

    def __init__(self) -> None:
        self.nbytes = 0
        self.since = 0  # when it began holding its message (order among the streams)


class Budget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.partial = 0  # bytes of messages being read, over every stream
        self.queued = 0  # bytes of messages read whole that wait for the client
        self._holdings: set[Holding] = set()
        self._order = itertools.count(1)
        self._room = trio.Event()
        self.closed = False  # the server is gone: nobody waits any more

    @property
    def held(self) -> int:
        return self.partial + self.queued

    def over(self) -> bool:
        return self.held > self.limit

    def holding(self) -> Holding:
        """A new stream's holding (give it back with :meth:`drop`)."""
        holding = Holding()
        self._holdings.add(holding)
        return holding

    def hold(self, holding: Holding, nbytes: int) -> None:
        """``holding``'s stream holds ``nbytes`` now."""
        if holding.nbytes == 0 and nbytes > 0:
            holding.since = next(self._order)
        self.partial += nbytes - holding.nbytes
        shrank = nbytes < holding.nbytes
        holding.nbytes = nbytes
        if nbytes >= LARGE and not _mapping:
            _map_large_blocks()
        if shrank:
            self._wake()

    def drop(self, holding: Holding) -> None:
        """The stream ended: it holds nothing any more."""
        self.hold(holding, 0)
        self._holdings.discard(holding)

    def enqueue(self, nbytes: int) -> None:
        self.queued += nbytes

    def dequeue(self, nbytes: int) -> None:
        self.queued -= nbytes
        if nbytes:
            self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _first(self, holding: Holding) -> bool:
        """Nothing waits for the client, and ``holding``'s stream began its message before every
        other stream holding one: it may read on to its end (see the module docstring)."""
        if self.queued or holding.nbytes == 0:
            return False
        return all(other.since >= holding.since for other in self._holdings if other.nbytes)

    async def room(self, holding: Holding) -> None:
        """Wait until ``holding``'s stream may read on."""
        while self.over() and not self.closed and not self._first(holding):
            await self._room.wait()

    def _wake(self) -> None:
        self._room.set()
        self._room = trio.Event()
