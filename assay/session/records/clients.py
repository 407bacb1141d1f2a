"""The ``assay.client.capabilities`` event (docs/wrap-records.md, "The client"): what the client
of a wrap declared about itself, a fact of the session rather than of one call, in the decision
log.

What a later reader needs to know whether the person at the client can be asked
(``assay mcp policy suggest`` keeps a client's everyday tools out of an approval it can never
give): where the client declared it (its ``initialize``, or, in the 2026-07-28 era, which has
no ``initialize``, a request's own ``_meta``), the protocol version and client name it gave,
and its elicitation capability as wrap reads it for approvals (``form``, ``url``, ``none``).
Everything a client chose is bounded.

Sans-IO: plain values in, one line's bytes out. :class:`ClientNotes` says when a new event is
due: at most :data:`EVENTS_MAX` per run, and a request of the 2026-07-28 era only when what it
declares differs from what the last one declared.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from assay.session.records.encoding import event_line
from assay.session.replies import PROTOCOL_VERSION_META

__all__ = ["CLIENT_TYPE", "EVENTS_MAX", "ClientNotes", "client_data", "client_line", "new_client_id"]

CLIENT_TYPE: Final = "assay.client.capabilities"
EVENTS_MAX: Final = 16  # events of this type per run: a client that keeps changing its mind is not logged forever
TEXT_MAX: Final = 256  # characters of a client name, version or protocol version
CLIENT_INFO_META: Final = "io.modelcontextprotocol/clientInfo"


def new_client_id() -> str:
    """``evt_client_<uuid4>``."""
    return f"evt_client_{uuid.uuid4()}"


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_MAX else f"{text[:TEXT_MAX]}…(cut: {len(text)} characters)"


def _text(value: Any) -> str | None:
    return _cut(value) if isinstance(value, str) else None


def client_data(
    *, declared_in: str, protocol_version: Any, client_info: Any, elicitation: str, session: str | None, server: str
) -> dict[str, Any]:
    """The event's ``data``, members in this order: ``declared_in`` (``initialize`` or
    ``request``), ``protocol_version``?, ``client``? (``name``?, ``version``?), ``elicitation``,
    ``session``, ``server``."""
    data: dict[str, Any] = {"declared_in": declared_in}
    version = _text(protocol_version)
    if version is not None:
        data["protocol_version"] = version
    if isinstance(client_info, dict):
        client = {k: t for k in ("name", "version") if (t := _text(client_info.get(k))) is not None}
        if client:
            data["client"] = client
    data["elicitation"] = elicitation
    data["session"] = session
    data["server"] = server
    return data


def client_line(event_id: str, time: str, source: str, data: dict[str, Any]) -> bytes:
    """The CloudEvents 1.0 line (no ``datacontenttype``), encoded like every record."""
    return event_line(CLIENT_TYPE, event_id, time, source, data)


class ClientNotes:
    """When the session's client facts are due for a new event (module docstring)."""

    __slots__ = ("written", "_last_request")

    def __init__(self) -> None:
        self.written = 0
        self._last_request: tuple[Any, ...] | None = None

    @property
    def open(self) -> bool:
        """Whether another event may still be written."""
        return self.written < EVENTS_MAX

    def initialize(self, params: Any, elicitation: str) -> dict[str, Any] | None:
        """The facts of an ``initialize`` request (``params`` as sent), or None past the cap."""
        if not self.open:
            return None
        self.written += 1
        self._last_request = None  # a new connection: its first modern request is told again
        p = params if isinstance(params, dict) else {}
        return {
            "declared_in": "initialize",
            "protocol_version": p.get("protocolVersion"),
            "client_info": p.get("clientInfo"),
            "elicitation": elicitation,
        }

    def request(self, meta: dict[str, Any], elicitation: str) -> dict[str, Any] | None:
        """The facts a 2026-07-28-era request declares in its ``_meta``, or None when they are
        what the last such request declared (or past the cap)."""
        if not self.open:
            return None
        version, info = meta.get(PROTOCOL_VERSION_META), meta.get(CLIENT_INFO_META)
        key = (
            elicitation,
            _text(version),
            *(_text(info.get(k)) if isinstance(info, dict) else None for k in ("name", "version")),
        )
        if key == self._last_request:
            return None
        self._last_request = key
        self.written += 1
        return {"declared_in": "request", "protocol_version": version, "client_info": info, "elicitation": elicitation}
