"""The HTTP front's protocol logic, sans-IO (docs/serve.md, "How a request flows").

What a request to the gateway's endpoint must be before anything reaches the gateway, read from
its method, path, headers and body as plain values: the route (/mcp, the protected-resource
metadata, else 404), ``Origin`` (403), the body's size (413), ``Accept`` (406), the JSON-RPC
message (400 with a parse or invalid-request error), the protocol era and, for a 2026-07-28
request, its routing headers against its body (400 with -32020). A refusal is a
:class:`Refusal`: the HTTP status, the headers and the JSON-RPC error body to answer with.

Also here: the event-stream encoding and the ``server/discover`` answer (the 2025-era session
table and the per-user count of requests in flight: :mod:`assay.gateway.sessiontable`). No trio, no sockets: the shell
(:mod:`assay.shells.serve`) feeds values in and writes what comes out.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import msgspec

from assay.session.admission import MAX_DEPTH, has_long_digit_run, too_deep

__all__ = [
    "HEADER_MISMATCH",
    "LEGACY_VERSIONS",
    "MCP_PATH",
    "METADATA_PATH",
    "MODERN_VERSIONS",
    "Accepts",
    "Era",
    "Message",
    "Refusal",
    "Route",
    "accepts",
    "check_head",
    "discover_result",
    "encode",
    "error_message",
    "header_map",
    "read_message",
    "sse_event",
    "synthesized_initialize",
]

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"
#: the stateless era (per-request ``_meta``, no session)
MODERN_VERSIONS = ("2026-07-28",)
#: the eras of the ``initialize`` handshake and ``Mcp-Session-Id``
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_META = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
#: the methods whose ``Mcp-Name`` header mirrors a parameter, and which one
NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: a request's identity or session is refused (401, 403, 404)
REFUSED = -32001
HEADER_MISMATCH = -32020
UNSUPPORTED_VERSION = -32022

_ROUTING = ("mcp-protocol-version", "mcp-method", "mcp-name", "mcp-session-id")
_B64_PREFIX, _B64_SUFFIX = "=?base64?", "?="


@dataclass(frozen=True)
class Refusal(Exception):
    """A request answered with an HTTP error: ``status``, ``headers``, and a JSON-RPC error body
    (``code``, ``message``, ``data``; ``id`` the request's when it was read, else null)."""

    status: int
    code: int
    message: str
    id: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    data: Any = None

    def body(self) -> bytes:
        return encode(error_message(self.id, self.code, self.message, self.data))


def error_message(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


def encode(message: Any) -> bytes:
    """One JSON text on one line (a body, an event's data)."""
    return msgspec.json.encode(message)


def sse_event(message: Any) -> bytes:
    """One server-sent event carrying one JSON-RPC message."""
    return b"event: message\ndata: " + encode(message) + b"\n\n"


def header_map(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header names lowercased -> values (latin-1); repeated fields joined by ", ". A routing
    header (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Session-Id``) given
    twice is refused: two readers could take different copies."""
    found: dict[str, str] = {}
    for raw_name, raw_value in raw:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1").strip(" \t")
        if name in found:
            if name in _ROUTING:
                raise Refusal(
                    400, HEADER_MISMATCH if name != "mcp-session-id" else INVALID_REQUEST, f"{name} given twice"
                )
            found[name] = f"{found[name]}, {value}"
        else:
            found[name] = value
    return found


# -- the head of a request ---------------------------------------------------------------------


class Route(Enum):
    MCP = "mcp"
    METADATA = "metadata"


@dataclass(frozen=True)
class Accepts:
    json: bool
    sse: bool


def accepts(header: str | None) -> Accepts:
    """What an ``Accept`` header allows of the two answers (no header: both). Each answer's type
    is weighed by the most specific range that names it (``application/json`` before
    ``application/*`` before ``*/*``, RFC 9110, section 12.5.1), so ``application/json;q=0, */*``
    refuses JSON; among equally specific ranges, one that allows it is enough."""
    if header is None or not header.strip():
        return Accepts(True, True)
    json_rank = sse_rank = -1
    json_ok = sse_ok = False
    for item in header.split(","):
        kind, _, params = item.strip().partition(";")
        kind = kind.strip().lower()
        ok = not any(_refused(p) for p in params.split(";"))
        rank = _ranks.get(kind)
        if rank is None:
            continue
        if rank[0] > json_rank:
            json_rank, json_ok = rank[0], ok
        elif rank[0] == json_rank >= 0:
            json_ok = json_ok or ok
        if rank[1] > sse_rank:
            sse_rank, sse_ok = rank[1], ok
        elif rank[1] == sse_rank >= 0:
            sse_ok = sse_ok or ok
    return Accepts(json_ok, sse_ok)


#: a media range -> how specifically it names (JSON, an event stream): 2 the type itself, 1 its
#: type's wildcard, 0 ``*/*``, -1 not at all
_ranks = {
    "*/*": (0, 0),
    "application/*": (1, -1),
    "application/json": (2, -1),
    "text/*": (-1, 1),
    "text/event-stream": (-1, 2),
}


def _refused(param: str) -> bool:
    """A media range's parameter ``q=0`` (the name in any case, the weight 0 in any spelling)."""
    name, _, value = param.partition("=")
    if name.strip().lower() != "q":
        return False
    try:
        return float(value.strip()) <= 0
    except ValueError:
        return False


def check_head(
    method: str,
    path: str,
    headers: Mapping[str, str],
    *,
    origins: Iterable[str],
    max_body_bytes: int,
    resource_path: str = MCP_PATH,
) -> Route:
    """The route of a request, read from its method, path and headers; a :class:`Refusal` for
    a body framed both by ``Content-Length`` and ``Transfer-Encoding`` (400), an unknown path (404), an ``Origin`` not allowed (403), a method /mcp does not take (405), a
    declared body over the cap (413), a content type not JSON (415) or an ``Accept`` that allows
    none of the answers (406)."""
    if "transfer-encoding" in headers and "content-length" in headers:
        # framed two ways: a server must not keep the connection (RFC 9112, section 6.1)
        raise Refusal(400, INVALID_REQUEST, "Content-Length with Transfer-Encoding", headers=(("connection", "close"),))
    if path in (METADATA_PATH, METADATA_PATH + resource_path) and resource_path.startswith("/"):
        if method not in ("GET", "HEAD"):
            raise Refusal(405, INVALID_REQUEST, "Method not allowed", headers=(("allow", "GET"),))
        return Route.METADATA
    if path != MCP_PATH:
        raise Refusal(404, INVALID_REQUEST, "Not found")
    origin = headers.get("origin")
    if origin is not None and origin not in set(origins):
        raise Refusal(403, INVALID_REQUEST, "Origin not allowed")
    if method not in ("POST", "GET", "DELETE"):
        raise Refusal(405, INVALID_REQUEST, "Method not allowed", headers=(("allow", "POST, GET, DELETE"),))
    accept = accepts(headers.get("accept"))
    if method == "POST":
        length = headers.get("content-length")
        if length is not None:
            if not length.isascii() or not length.isdigit():
                raise Refusal(400, INVALID_REQUEST, "Bad Content-Length")
            if int(length) > max_body_bytes:
                raise Refusal(413, INVALID_REQUEST, f"Request body over {max_body_bytes} bytes")
        kind = headers.get("content-type", "application/json").partition(";")[0].strip().lower()
        if kind != "application/json":
            raise Refusal(415, INVALID_REQUEST, "Content-Type must be application/json")
        if not (accept.json or accept.sse):
            raise Refusal(406, INVALID_REQUEST, "Accept must allow application/json or text/event-stream")
    elif method == "GET" and not accept.sse:
        raise Refusal(406, INVALID_REQUEST, "Accept must allow text/event-stream")
    return Route.MCP


# -- the body ----------------------------------------------------------------------------------


class Era(Enum):
    #: 2025-03-26 .. 2025-11-25: ``initialize``, ``Mcp-Session-Id``
    LEGACY = "legacy"
    #: 2026-07-28: per-request ``_meta``, no session
    MODERN = "modern"


@dataclass(frozen=True)
class Message:
    """One checked JSON-RPC message of a POST."""

    era: Era
    kind: str  # request | notification | response
    message: dict[str, Any]
    id: Any = None
    method: str | None = None
    #: the 2026-07-28 request's protocol version (from ``_meta``)
    version: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


def _decode_name(value: str) -> str | None:
    """An ``Mcp-Name`` value as the client meant it (the ``=?base64?...?=`` form decoded);
    None when it cannot be decoded."""
    if value.startswith(_B64_PREFIX) and value.endswith(_B64_SUFFIX) and len(value) >= 11:
        try:
            return base64.b64decode(value[len(_B64_PREFIX) : -len(_B64_SUFFIX)], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
    return value


def _kind(msg: dict[str, Any]) -> str | None:
    has_id = "id" in msg
    if has_id:
        msg_id = msg["id"]
        if isinstance(msg_id, bool) or not isinstance(msg_id, (str, int)):
            return None
    # MCP's JSON-RPC, as the SDKs read it: params and a result are objects; an error an object
    # with an integer code and a string message (tests/serve/test_front_differential.py)
    if "method" in msg:
        if not isinstance(msg["method"], str) or "result" in msg or "error" in msg:
            return None
        if not isinstance(msg.get("params", {}), dict):
            return None
        return "request" if has_id else "notification"
    if not has_id or ("result" in msg) == ("error" in msg):
        return None
    if "result" in msg:
        return "response" if isinstance(msg["result"], dict) else None
    error = msg["error"]
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return None
    code = error.get("code")
    return "response" if isinstance(code, int) and not isinstance(code, bool) else None


def read_message(body: bytes, headers: Mapping[str, str]) -> Message:
    """The JSON-RPC message of a POST body and its era; a :class:`Refusal` (400) for what is not
    one JSON-RPC message, an unsupported ``MCP-Protocol-Version``, or a 2026-07-28 request whose
    routing headers disagree with its body (-32020)."""
    try:
        msg = msgspec.json.decode(body)
    except (msgspec.DecodeError, ValueError, RecursionError):
        raise Refusal(400, PARSE_ERROR, "Parse error: the body is not JSON") from None
    # the guard reads the message as wrap reads a client frame (docs/wrap.md, "Client frames"),
    # which refuses what msgspec reads: a refusal there would leave the request unanswered
    if too_deep(body):
        raise Refusal(400, PARSE_ERROR, f"Parse error: nested deeper than {MAX_DEPTH}")
    if has_long_digit_run(body) and _overflows(msg):
        raise Refusal(400, PARSE_ERROR, "Parse error: a number beyond a double's range")
    if isinstance(msg, list):
        raise Refusal(400, INVALID_REQUEST, "Invalid request: one JSON-RPC message per POST (no batches)")
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        raise Refusal(400, INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message")
    kind = _kind(msg)
    msg_id = msg.get("id") if kind in ("request", "response") else None
    if kind is None:
        raise Refusal(400, INVALID_REQUEST, "Invalid request: not a JSON-RPC request, notification or response")
    method = msg.get("method") if kind != "response" else None
    params = msg.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    header_version = headers.get("mcp-protocol-version")
    modern = (isinstance(meta, dict) and VERSION_META in meta) or header_version in MODERN_VERSIONS
    if not modern:
        if header_version is not None and header_version not in LEGACY_VERSIONS and method != "initialize":
            raise _unsupported(msg_id, header_version)
        return Message(Era.LEGACY, kind, msg, msg_id, method)
    return _modern(kind, msg, msg_id, method, params, meta, headers)


def _overflows(value: Any) -> bool:
    """An integer in ``value`` that a double cannot hold (serde, and the guard, refuse it)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, int):
            try:
                float(item)
            except OverflowError:
                return True
    return False


def _unsupported(msg_id: Any, requested: str) -> Refusal:
    data = {"supported": [*MODERN_VERSIONS, *LEGACY_VERSIONS], "requested": requested}
    return Refusal(400, UNSUPPORTED_VERSION, "Unsupported protocol version", msg_id, data=data)


def _modern(
    kind: str, msg: dict[str, Any], msg_id: Any, method: str | None, params: Any, meta: Any, headers: Mapping[str, str]
) -> Message:
    if kind == "response":
        raise Refusal(400, INVALID_REQUEST, "Invalid request: a 2026-07-28 client sends no responses", msg_id)
    if not isinstance(meta, dict) or VERSION_META not in meta:
        raise Refusal(400, INVALID_PARAMS, f"params._meta must carry {VERSION_META}", msg_id)
    version = meta[VERSION_META]

    def mismatch(what: str) -> Refusal:
        return Refusal(400, HEADER_MISMATCH, f"Header mismatch: {what}", msg_id)

    if headers.get("mcp-protocol-version") != version:
        raise mismatch("MCP-Protocol-Version does not match params._meta")
    if headers.get("mcp-method") != method:
        raise mismatch("Mcp-Method does not match the body's method")
    name_key = NAME_PARAM.get(method or "")
    if name_key is not None and isinstance(params, dict) and params.get(name_key) is not None:
        given = headers.get("mcp-name")
        if given is None or _decode_name(given) != params[name_key]:
            raise mismatch(f"Mcp-Name does not match the body's {name_key}")
    if not isinstance(version, str) or version not in MODERN_VERSIONS:
        raise _unsupported(msg_id, str(version))
    if kind == "request" and CLIENT_CAPABILITIES_META not in meta:
        raise Refusal(400, INVALID_PARAMS, f"params._meta must carry {CLIENT_CAPABILITIES_META}", msg_id)
    return Message(Era.MODERN, kind, msg, msg_id, method, version, meta)


def synthesized_initialize(request: Message) -> dict[str, Any]:
    """The ``initialize`` a 2026-07-28 request stands for (its ``_meta``: version, client info,
    capabilities), for :meth:`assay.gateway.contract.Gateway.open`."""
    info = request.meta.get(CLIENT_INFO_META)
    caps = request.meta.get(CLIENT_CAPABILITIES_META)
    params = {
        "protocolVersion": request.version,
        "capabilities": caps if isinstance(caps, dict) else {},
        "clientInfo": info if isinstance(info, dict) else {"name": "unknown", "version": "0"},
        "_meta": dict(request.meta),
    }
    return {"jsonrpc": "2.0", "id": request.id, "method": "initialize", "params": params}


def discover_result(initialize_result: Mapping[str, Any]) -> dict[str, Any]:
    """The ``server/discover`` answer from the gateway's ``initialize`` result."""
    result: dict[str, Any] = {
        "supportedVersions": [*MODERN_VERSIONS, *LEGACY_VERSIONS],
        "capabilities": initialize_result.get("capabilities", {}),
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
    }
    if isinstance(initialize_result.get("instructions"), str):
        result["instructions"] = initialize_result["instructions"]
    if isinstance(initialize_result.get("serverInfo"), dict):
        result["_meta"] = {SERVER_INFO_META: initialize_result["serverInfo"]}
    return result
