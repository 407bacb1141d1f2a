"""What wrap does to the TCP connection of each HTTP exchange (docs/remote.md, "Connections").

A kept-alive connection and a server that writes its answer in several pieces with Nagle's
algorithm on (its socket without ``TCP_NODELAY``) stall each other: the server sends the head
of the answer, then holds the next piece until the head is acknowledged, and the client's kernel,
which has seen the client write a request right after the previous answer, treats the
connection as interactive and delays that acknowledgement by its delayed-ACK timer (at least
40 ms on Linux). Every answer then waits ~40 ms between its head and its body. A new
connection starts in quick-ack mode, which is why a client that opens one connection per call
(the SDK's, whose event streams are closed at their answer) never sees it, and why wrap, which
keeps its connections, did.

:func:`ack_promptly` takes the connection out of the delayed-ACK mode once the head of an
answer is in: ``TCP_QUICKACK`` sends the pending acknowledgement at once, and the rest of the
answer is acknowledged as it is read, so the server's next piece leaves at once. The kernel goes
back to delaying ACKs when the client next writes a request, so it is set again on each answer:
one ``setsockopt`` per exchange. Where the platform has no ``TCP_QUICKACK`` (it is a Linux
option) nothing is done.
"""

from __future__ import annotations

import socket
from typing import Any

__all__ = ["ack_promptly"]

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


def ack_promptly(response: Any) -> None:
    """Acknowledge what the server sent so far at once, and the rest of ``response`` as it is
    read (see the module docstring). ``response`` is an ``httpx2.Response`` whose head has come;
    its connection is found through the ``network_stream`` extension."""
    if _QUICKACK is None:
        return
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is None:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
    except OSError:  # not TCP (a Unix socket), or already closed: nothing to acknowledge
        pass
