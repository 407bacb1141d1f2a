"""HTTP/2 data for a stream already answered (docs/serve.md, "How a request flows"): the front
answers some requests before reading their body (401, 413, 415, 429...), and hypercorn's HTTP/2
protocol then forgets the stream. DATA the client still sends on it made hypercorn look the
stream up, raise ``KeyError``, and, in its trio worker, end the whole server: two frames from
anyone who can connect stopped `assay mcp serve`. (hypercorn guards the same lookup for the
stream's end, not for its data; upstream issue pgjones/hypercorn#329.)

:func:`guard_h2_streams` gives each HTTP/2 connection's stream table a fallback: a stream it no
longer holds is one that drops what it is handed. hypercorn then acknowledges the data as for any
stream, so the connection's flow-control window is given back and the connection goes on. A
stream it holds is looked up as before (a dict's ``__missing__`` runs only on a miss). Installed
once per process, for the version ``pyproject.toml`` pins."""

from __future__ import annotations

from typing import Any

__all__ = ["guard_h2_streams"]


class _Gone:
    """A stream the connection no longer holds: what it is handed is dropped."""

    idle = True

    async def handle(self, _event: Any) -> None:
        return None


_GONE = _Gone()


class _Streams(dict[int, Any]):
    def __missing__(self, _stream_id: int) -> Any:
        return _GONE


def guard_h2_streams() -> None:
    """Install the fallback in hypercorn's HTTP/2 protocol (idempotent)."""
    from hypercorn.protocol import h2 as protocol

    cls: Any = protocol.H2Protocol
    if getattr(cls, "_assay_guarded_streams", False):
        return
    init = cls.__init__

    def init_guarded(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.streams = _Streams(self.streams)

    cls.__init__ = init_guarded
    cls._assay_guarded_streams = True
