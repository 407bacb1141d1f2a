"""What the wrap relay needs of a child, as Protocols: :class:`ChildHandle` and the two byte
streams it talks through. :class:`~assay.proc.child.Child` and
:class:`~assay.proc.kept.KeptChild` satisfy it (mypy checks that in
:mod:`assay.proc.kept`), and so can an in-memory child in a test, which never spawns anything
(docs/architecture.md, "Child processes")."""

from __future__ import annotations

from typing import Protocol

__all__ = ["ByteReceiver", "ByteSender", "ChildHandle"]


class ByteReceiver(Protocol):
    """The receiving half of a byte stream (a pipe's ``FdStream``, a trio memory stream)."""

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        """Up to ``max_bytes`` bytes; empty at end of file."""
        ...


class ByteSender(Protocol):
    """The sending half of a byte stream."""

    async def send_all(self, data: bytes) -> None:
        """Send every byte of ``data``."""
        ...

    async def aclose(self) -> None:
        """Close the stream (the reader sees end of file)."""
        ...


class ChildHandle(Protocol):
    """A running child, as the relay uses it: its stdin and stdout, its exit, signals to all of
    its processes, and the stop that ends and reaps them."""

    @property
    def stdin(self) -> ByteSender | None: ...

    @property
    def stdout(self) -> ByteReceiver | None: ...

    @property
    def returncode(self) -> int | None:
        """``subprocess``'s convention (-N: died of signal N); None until it exited."""
        ...

    async def wait_exit(self) -> None:
        """Wait until the child has exited (its processes may not be reaped yet)."""
        ...

    def signal_group(self, sig: int) -> None:
        """Deliver ``sig`` to every process of the child (its group, or the keeper's tree)."""
        ...

    async def stop(self, *, term_grace: float = 0.5) -> int | None:
        """SIGTERM, SIGKILL after ``term_grace`` seconds, reap; the return code. Shielded."""
        ...

    async def aclose_streams(self) -> None:
        """Close the pipes to and from the child."""
        ...
