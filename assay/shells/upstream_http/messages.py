"""The JSON-RPC side of a remote wrap (sans-IO): docs/remote.md, "Requests and headers".

- :func:`outgoing` reads what wrap needs of one client frame before it is POSTed: its kind,
  its id, its method and, for a 2026-07-28 request, the routing headers that era asks for
  (``MCP-Protocol-Version`` from ``params._meta``, ``Mcp-Method``, and ``Mcp-Name`` for the
  methods that name a tool, a prompt or a resource). The frame's bytes are sent unchanged.
- :func:`incoming` reads what wrap needs of one server message: whether it answers a request,
  and which; the negotiated version of an ``initialize`` answer.
- :func:`error_line` is the answer wrap gives in the server's place when the server cannot.
- :func:`as_line` turns a JSON body or an event's data into one line for the session.
- :func:`visible_ascii` and :func:`header_safe` say whether a value the server gave (a session
  id, a protocol version, an event id) can be sent back in a header as it is.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

import msgspec

__all__ = [
    "UPSTREAM_ERROR",
    "Incoming",
    "Outgoing",
    "as_line",
    "error_line",
    "header_safe",
    "header_value",
    "incoming",
    "outgoing",
    "visible_ascii",
]

UPSTREAM_ERROR = -32000  # the code of wrap's answers for a request the server could not answer
PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_HEADER_SAFE = re.compile(r"[\x20-\x7e]*\Z")
_B64 = re.compile(r"=\?base64\?.*\?=\Z")
_VISIBLE = re.compile(r"[\x21-\x7e]+\Z")
MAX_ECHOED = 4096  # characters of a server value wrap sends back in a header


@dataclass(frozen=True, slots=True)
class Outgoing:
    kind: str  # request | notification | response | other
    id: Any  # the decoded id of a request or response, else None
    method: str | None
    headers: tuple[tuple[str, str], ...]  # the 2026-07-28 routing headers, else ()
    name: str | None = None  # a tools/call's tool name
    arguments: Any = None  # a tools/call's arguments; the requestId of notifications/cancelled


@dataclass(frozen=True, slots=True)
class Incoming:
    kind: str  # request | notification | response | other
    id: Any
    raw_result: bytes | msgspec.Raw | None = (
        None  # an answer's result, undecoded and uncopied (most answers never need it)
    )

    @property
    def result(self) -> Any:
        return None if self.raw_result is None else _decode(self.raw_result)

    @property
    def protocol_version(self) -> str | None:
        """An answer's ``result.protocolVersion`` (an ``initialize`` answer), else None."""
        result = self.result
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        return version if isinstance(version, str) else None


class _Head(msgspec.Struct):
    """What :func:`incoming` reads of a message: its members' presence, the id, the result
    left as bytes (a large result is scanned, never built)."""

    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET
    result: msgspec.Raw = msgspec.Raw(b"")


_head = msgspec.json.Decoder(_Head)


def header_value(value: str) -> str:
    """A value for ``Mcp-Name`` that survives an HTTP field: as is when it is plain printable
    ASCII without edge spaces, else ``=?base64?<UTF-8 bytes in base64>?=``."""
    if _HEADER_SAFE.match(value) and value == value.strip() and not _B64.match(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii") + "?="


def visible_ascii(value: str) -> bool:
    """Visible ASCII only (0x21 to 0x7E), at least one character and at most
    :data:`MAX_ECHOED`: what an ``Mcp-Session-Id`` must be to be sent back."""
    return len(value) <= MAX_ECHOED and _VISIBLE.match(value) is not None


def header_safe(value: str) -> bool:
    """Printable ASCII (spaces inside, none at the ends), 1 to :data:`MAX_ECHOED` characters:
    a value that goes into a header field unchanged and is read back the same (a protocol
    version, an event id)."""
    return 0 < len(value) <= MAX_ECHOED and _HEADER_SAFE.match(value) is not None and value == value.strip(" \t")


def _decode(line: bytes | msgspec.Raw) -> Any:
    try:
        return msgspec.json.decode(line)
    except (msgspec.DecodeError, ValueError):
        try:  # what msgspec refuses that JSON allows (a huge integer)
            return json.loads(line if isinstance(line, bytes) else bytes(line))
        except (ValueError, RecursionError):
            return None


def _kind(msg: Any) -> str:
    if not isinstance(msg, dict):
        return "other"
    if "method" in msg:
        return "request" if "id" in msg else "notification"
    return "response" if "id" in msg else "other"


def outgoing(line: bytes) -> Outgoing:
    """What wrap needs of one client frame (an admitted one: valid JSON)."""
    msg = _decode(line)
    kind = _kind(msg)
    if kind == "other":
        return Outgoing(kind, None, None, ())
    method = msg.get("method")
    method = method if isinstance(method, str) else None
    headers: tuple[tuple[str, str], ...] = ()
    params = msg.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(PROTOCOL_VERSION_META) if isinstance(meta, dict) else None
    if method is not None and isinstance(version, str):
        found = [("MCP-Protocol-Version", header_value(version)), ("Mcp-Method", header_value(method))]
        key = NAME_PARAM.get(method)
        name = params.get(key) if key is not None and isinstance(params, dict) else None
        if isinstance(name, str):
            found.append(("Mcp-Name", header_value(name)))
        headers = tuple(found)
    if method == "notifications/cancelled" and isinstance(params, dict):
        return Outgoing(kind, None, method, headers, arguments=params.get("requestId"))
    if method == "tools/call" and isinstance(params, dict) and isinstance(params.get("name"), str):
        return Outgoing(kind, msg.get("id"), method, headers, params["name"], params.get("arguments"))
    return Outgoing(kind, msg.get("id"), method, headers)


def incoming(line: bytes) -> Incoming:
    """What wrap needs of one server message (its head; the result stays bytes)."""
    try:
        head = _head.decode(line)
    except (msgspec.DecodeError, ValueError):  # not an object, or what msgspec refuses (a huge id)
        msg = _decode(line)
        kind = _kind(msg)
        if kind == "other":
            return Incoming(kind, None)
        raw = msg.get("result") if kind == "response" else None
        return Incoming(kind, msg.get("id"), None if raw is None else json.dumps(raw).encode())
    if head.method is not msgspec.UNSET:
        return Incoming("request" if head.id is not msgspec.UNSET else "notification", None)
    if head.id is msgspec.UNSET:
        return Incoming("other", None)
    return Incoming("response", head.id, head.result if len(head.result) else None)


def error_line(request_id: Any, message: str, data: dict[str, Any] | None = None) -> bytes:
    """A JSON-RPC error answer from wrap to request ``request_id`` (code -32000)."""
    error: dict[str, Any] = {"code": UPSTREAM_ERROR, "message": message}
    if data:
        error["data"] = data
    return (
        json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "error": error}, ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8", "surrogatepass")
        + b"\n"
    )


def as_line(body: bytes) -> bytes | None:
    """One JSON message (a body, an event's data) as one line: its bytes, with the line breaks
    JSON allows only as white space turned into spaces; None for a body of white space only."""
    if b"\n" in body or b"\r" in body:
        body = body.replace(b"\r", b" ").replace(b"\n", b" ")
    if not body.strip():
        return None
    return body + b"\n"
