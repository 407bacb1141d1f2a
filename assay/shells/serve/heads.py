"""One write per answer on HTTP/1.1 (docs/serve.md, "How a request flows"): hypercorn's h11
protocol writes a response's head as soon as the app starts the response, then its body, then
the body's end, each a write of its own. A JSON answer is one ASGI start and one whole body, so a
client got its head in one TCP segment and woke again for the body. :func:`hold_heads` makes the
protocol keep the head until the body's first bytes (or the body's end) and write them together,
and skip the empty write that ends a body of known length: one write and one wake-up of the
client per answer. Nothing else changes: 1xx answers, an event stream's chunks (the head goes with
its first chunk, which the front writes at once), errors hypercorn writes itself, and any other
event on the stream first writes a head still held.

hypercorn has no setting for this; :func:`hold_heads` replaces two methods of its
``H11Protocol`` (for the version ``pyproject.toml`` pins), once per process, and is a no-op after.
HTTP/2 is untouched (its own frames are buffered and flushed by hypercorn's h2 protocol)."""

from __future__ import annotations

from typing import Any

__all__ = ["hold_heads"]


def hold_heads() -> None:
    """Install the held heads in hypercorn's h11 protocol (idempotent)."""
    import h11
    from hypercorn.events import RawData
    from hypercorn.protocol import h11 as protocol
    from hypercorn.protocol.events import Body, EndBody

    cls: Any = protocol.H11Protocol
    if getattr(cls, "_assay_held_heads", False):
        return
    stream_send = cls.stream_send

    async def send_h11_event(self: Any, event: Any) -> None:
        try:
            data = self.connection.send(event)
        except h11.LocalProtocolError:
            if self.connection.their_state != h11.ERROR:
                raise
            return
        if type(event) is h11.Response:  # a final head (a 1xx is an InformationalResponse)
            self._assay_head = data
            return
        held = self._assay_head
        if held is not None:
            self._assay_head = None
            data = held + data
        if data:  # the end of a body of known length is no bytes: no write
            await self.send(RawData(data=data))

    async def send_stream_event(self: Any, event: Any) -> None:
        held = self._assay_head
        if held is not None and not isinstance(event, (Body, EndBody)):
            self._assay_head = None  # anything but the body: the head first, as hypercorn would
            await self.send(RawData(data=held))
        await stream_send(self, event)

    cls._assay_head = None
    cls._send_h11_event = send_h11_event
    cls.stream_send = send_stream_event
    cls._assay_held_heads = True
