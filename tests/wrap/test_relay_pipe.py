"""The relay's pipe I/O: straight non-blocking reads and writes, still fair and cancellable
(docs/wrap.md, "Throughput")."""

from __future__ import annotations

import os

import pytest
import trio
import trio.testing

from assay.shells.stdio.relay import _Pipe


def pipe_pair() -> tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream]:
    r, w = os.pipe()
    return trio.lowlevel.FdStream(r), trio.lowlevel.FdStream(w)


async def test_reads_and_writes_go_through_and_wait_when_not_ready():
    r, w = pipe_pair()
    reader, writer = _Pipe(r), _Pipe(w)
    assert reader.fd is not None and writer.fd is not None
    got = []

    async def read_one() -> None:
        got.append(await reader.read(100))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_one)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []  # nothing to read yet: it waits
        await writer.write(b"hello\n")
    assert got == [b"hello\n"]
    big = b"x" * (1 << 20)  # more than a pipe holds: the write waits for the reader

    async def drain() -> None:
        total = 0
        while total < len(big):
            total += len(await reader.read(1 << 16))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        await writer.write(big)
    await r.aclose()
    await w.aclose()


async def test_a_cancelled_scope_is_noticed_even_when_data_is_ready():
    r, w = pipe_pair()
    reader, writer = _Pipe(r), _Pipe(w)
    await writer.write(b"ready\n")
    with trio.CancelScope() as scope:
        scope.cancel()
        await reader.read(100)
        pytest.fail("read went on in a cancelled scope")
    assert scope.cancelled_caught
    assert await reader.read(100) == b"ready\n"  # nothing was consumed
    await r.aclose()
    await w.aclose()


async def test_an_always_ready_pipe_does_not_starve_other_tasks():
    r, w = pipe_pair()
    reader, _writer = _Pipe(r), _Pipe(w)  # the writing end stays open
    os.write(w.fileno(), b"z" * 60000)
    ticks = 0

    async def other() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        await trio.lowlevel.checkpoint()  # the other task is running
        before = ticks
        for _ in range(200):  # every read finds data ready
            assert await reader.read(10)
        assert ticks - before >= 5  # it yielded every few reads (200 reads, a yield every 16)
        nursery.cancel_scope.cancel()
    await r.aclose()
    await w.aclose()


async def test_a_closed_reader_is_a_broken_pipe_for_the_writer():
    r, w = pipe_pair()
    writer = _Pipe(w)
    await r.aclose()
    with pytest.raises(trio.BrokenResourceError):
        await writer.write(b"x")
    await w.aclose()


async def test_streams_that_are_not_pipes_use_their_own_methods():
    send, receive = trio.testing.memory_stream_pair()
    a, b = _Pipe(send), _Pipe(receive)
    assert a.fd is None and b.fd is None
    await a.write(b"abc")
    assert await b.read(10) == b"abc"
