"""The MCP protocol of `assay-mcp-server`, sans-IO (docs/server.md).

:class:`ServerProtocol` turns one inbound frame (a line without its terminator, or an
:class:`~assay.server.framing.Oversize` marker) into response bytes, ``None`` (no reply), or a
:class:`PendingCall` for `tools/call`. The I/O shell first tries ``call.inline`` (a handler that
can answer from an already parsed policy, without reading or parsing); when that is absent or
raises :class:`~assay.server.context.NeedsWorker`, it runs ``call.work`` in a worker under the
dispatch deadline. Either way the outcome goes back to :meth:`ServerProtocol.complete`, which
builds the CallToolResult bytes.

Nothing here writes: log events are queued on the buffered logger and the shell collects them
with :meth:`ServerProtocol.pending_log`. Tests drive everything synchronously with
:meth:`handle_blocking`.
"""

from __future__ import annotations

import functools
import json
import re
import time
from typing import Any, Callable, TypeGuard

from assay.canonical import StrictJSONError, loads_strict
from assay.server.config import ServerConfig
from assay.server.context import NeedsWorker, ToolContext
from assay.server.errors import INTERNAL_PAYLOAD, TIMEOUT_PAYLOAD, ToolError
from assay.server.framing import Oversize
from assay.server.info import server_info
from assay.server.jsontext import FixedPayload, compact_json, compact_size, plain_json, pretty_json
from assay.server.log import TARGET_BILLING, TARGET_MAIN, TARGET_SERVER, Logger, Preencoded, Prepared
from assay.server.tools import BY_NAME, TOOLS

__all__ = [
    "SUPPORTED_VERSIONS",
    "LATEST_VERSION",
    "META_VERSION_KEY",
    "NeedsWorker",
    "PendingCall",
    "ServerProtocol",
    "encode_message",
    "payload_text",
    "is_error_payload",
]

SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = "2025-11-25"
META_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
INIT_PARAMS_MESSAGE = "Invalid initialize params: expected the required legacy MCP fields"
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def encode_message(message: dict[str, Any]) -> bytes:
    """Compact JSON, non-ASCII raw, one line. Lone surrogates (valid in JSON escapes but
    not encodable as UTF-8) fall back to ASCII escapes, so stdout always carries valid UTF-8."""
    try:
        return compact_json(message).encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=True).encode("ascii") + b"\n"


def payload_text(payload: dict[str, Any]) -> str:
    """The CallToolResult text: 2-space pretty JSON, non-ASCII raw."""
    return pretty_json(payload)


def is_error_payload(payload: dict[str, Any]) -> bool:
    """An `error` member, or `allowed` exactly false."""
    return "error" in payload or payload.get("allowed") is False


def _result(result: Any, rpc_id: Any) -> bytes:
    return encode_message({"jsonrpc": "2.0", "result": result, "id": rpc_id})


# Results whose text is at most this long have the bytes before their id cached.
_HEAD_TEXT_MAX = 4096


@functools.lru_cache(maxsize=256)
def _result_head(text: str, is_error: bool) -> bytes:
    """The CallToolResult line up to its id: the line encoded with id 0, cut before the 0."""
    line = _result({"content": [{"type": "text", "text": text}], "isError": is_error}, 0)
    return line[: -len(b"0}\n")]


def _tool_result(text: str, is_error: bool, rpc_id: Any) -> bytes:
    """The CallToolResult line. An id that is a plain value (see plain_json) is spelled the same
    in every encoding of the line, so a cached head plus the id is exactly the encoded line."""
    if len(text) <= _HEAD_TEXT_MAX:
        id_text = plain_json(rpc_id)
        if id_text is not None:
            return _result_head(text, is_error) + id_text.encode("ascii") + b"}\n"
    return _result({"content": [{"type": "text", "text": text}], "isError": is_error}, rpc_id)


def _error(code: int, message: str, rpc_id: Any, data: Any = None) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return encode_message({"jsonrpc": "2.0", "error": err, "id": rpc_id})


def _compact_len(value: Any) -> int:
    try:
        return compact_size(value)
    except (TypeError, ValueError):
        return 0


def _valid_initialize(params: Any) -> TypeGuard[dict[str, Any]]:
    """The legacy ``initialize`` params: protocolVersion string, capabilities object,
    clientInfo{name,version} strings (docs/server.md, "Error catalogue": -32602)."""
    if not isinstance(params, dict):
        return False
    info = params.get("clientInfo")
    return (
        isinstance(params.get("protocolVersion"), str)
        and isinstance(params.get("capabilities"), dict)
        and isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
    )


def _correlation(params: Any) -> str:
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict) or "traceparent" not in meta:
        return "none"
    value = meta["traceparent"]
    if isinstance(value, str) and _TRACEPARENT.fullmatch(value) and value[:2] != "ff":
        return "propagated_trace_context"
    return "malformed_trace_context"


# The events every tool call writes, prepared once (their text is what Logger.event writes).
_METERED = Prepared("INFO", TARGET_BILLING, "assay.usage.metered", (), (("usage_type", "policy_check"), ("count", 1)))
_START = Prepared("INFO", TARGET_SERVER, "tool_call_start", ("rid", "rpc_id", "bytes_in", "args_bytes"))
_DONE = {
    (takes_decision, with_code): Prepared(
        "INFO",
        TARGET_SERVER,
        "tool_call_done",
        ("rid", "rpc_id", "duration_ms", "outcome")
        + (("allowed",) if takes_decision else ())
        + (("code",) if with_code else ()),
    )
    for takes_decision in (False, True)
    for with_code in (False, True)
}
_DECISION = Prepared("INFO", TARGET_SERVER, "tool_decision", ("rid", "rpc_id", "decision"))


@functools.lru_cache(maxsize=512)
def _decision_json(tool_name: str, effect: str, status: str, correlation: str) -> Preencoded:
    """The record's JSON, a string field of the log line; a handful of distinct values, so each
    is built (and encoded as a JSON string) once."""
    record = {
        "schema": "assay.tool_decision_surface.v0",
        "tool": {"name": tool_name},
        "server": {"id": "mcp"},
        "decision": {"effect": effect},
        "response": {"status": status, "side_effect_verified": False},
        "redaction": {"arguments_redacted": True, "secret_material_stored": False},
        "correlation": {"source": correlation},
    }
    return Preencoded(json.dumps(record, separators=(",", ":")))


class PendingCall:
    """A `tools/call` admitted and logged, waiting for its handler to run under the deadline.

    ``work()`` runs the handler on the full context (in a worker); ``inline`` is the same handler
    on the inline view of the context, which answers from an already parsed policy or raises
    NeedsWorker, or None when the tool always needs a worker. A ToolError becomes its payload;
    an unknown tool's ``work()`` raises (the fail-closed E_INTERNAL, the name never echoed)."""

    __slots__ = (
        "rid",
        "rpc_id",
        "tool_name",
        "takes_decision",
        "correlation",
        "started",
        "_run",
        "_args",
        "_ctx",
        "_view",
    )

    def __init__(
        self,
        rid: str,
        rpc_id: Any,
        tool_name: str,  # a known tool name, or "unknown" (never the caller's string)
        takes_decision: bool,
        correlation: str,
        started: float,
        run: Callable[[ToolContext, Any], dict[str, Any]] | None,
        arguments: Any,
        ctx: ToolContext,
        view: ToolContext | None,
    ) -> None:
        self.rid, self.rpc_id, self.tool_name = rid, rpc_id, tool_name
        self.takes_decision, self.correlation, self.started = takes_decision, correlation, started
        self._run, self._args, self._ctx, self._view = run, arguments, ctx, view

    def work(self) -> dict[str, Any]:
        if self._run is None:
            raise LookupError("unknown tool")
        try:
            return self._run(self._ctx, self._args)
        except ToolError as exc:
            return exc.payload()

    def _inline(self) -> dict[str, Any]:
        run, view = self._run, self._view
        if run is None or view is None:  # ``inline`` offers this only for a known tool with a view
            raise LookupError("no inline handler")
        try:
            return run(view, self._args)
        except ToolError as exc:
            return exc.payload()

    @property
    def inline(self) -> Callable[[], dict[str, Any]] | None:
        return self._inline if self._view is not None else None


class ServerProtocol:
    def __init__(
        self,
        root: str,
        config: ServerConfig,
        logger: Logger,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.logger = logger
        self.ctx = ToolContext(root, config, logger)
        self.ctx_inline = self.ctx.inline_view()
        self._clock = clock
        self._rid = 0
        self._server_info = server_info
        self._tools = BY_NAME
        self._tools_list = {"tools": [tool.listing() for tool in TOOLS]}

    # -- framing and admission ---------------------------------------------------------

    def _next_rid(self) -> str:
        self._rid += 1
        return f"r-{self._rid:06d}"

    def receive(self, frame: bytes | Oversize) -> bytes | PendingCall | None:
        rid = self._next_rid()  # every line, blank and oversize ones included
        if isinstance(frame, Oversize):  # the size gate comes first
            limit = self.config.max_msg_bytes
            self.logger.event("WARN", TARGET_MAIN, "limit_exceeded", rid=rid, bytes_in=frame.nbytes, max=limit)
            return _result(
                {
                    "allowed": False,
                    "error": {"code": "E_LIMIT_EXCEEDED", "message": f"message bytes={frame.nbytes} > max={limit}"},
                },
                None,
            )
        try:
            text = frame.decode("utf-8")
        except UnicodeDecodeError:  # ignored like any unparsable line
            self._parse_error(rid, "invalid_utf8")
            return None
        if not text or text.isspace():  # blank (what strip() would empty), without a copy
            return None
        try:
            message = loads_strict(text)
        except StrictJSONError as exc:
            self._parse_error(rid, exc.reason)
            return None
        if not isinstance(message, dict):
            self._parse_error(rid, "batch" if isinstance(message, list) else "not_an_object")
            return None
        if not isinstance(message.get("method"), str) or not isinstance(message.get("jsonrpc"), str):
            self._parse_error(rid, "not_a_request")
            return None
        return self._dispatch(rid, message, len(frame))

    def _parse_error(self, rid: str, reason: str) -> None:
        # the line's content is never echoed, only a fixed reason code.
        self.logger.event("WARN", TARGET_SERVER, "json_parse_error", rid=rid, error=reason)

    # -- methods --------------------------------------------------------------------------

    def _dispatch(self, rid: str, message: dict[str, Any], bytes_in: int) -> bytes | PendingCall | None:
        method: str = message["method"]
        params = message.get("params")  # `params: null` counts as absent
        if "id" not in message or method.startswith("notifications/"):
            # notifications never get a reply, whatever their name.
            if method == "notifications/initialized":
                self.logger.event("INFO", TARGET_SERVER, "initialized", rid=rid)
            return None
        rpc_id = message["id"]
        if isinstance(params, dict):  # the revision gate, requests only
            meta = params.get("_meta")
            if isinstance(meta, dict):
                requested = meta.get(META_VERSION_KEY)
                if isinstance(requested, str) and requested not in SUPPORTED_VERSIONS:
                    return _error(
                        -32022,
                        "unsupported protocol version",
                        rpc_id,
                        {"requested": requested, "supported": list(SUPPORTED_VERSIONS)},
                    )
        if method == "initialize":
            if not _valid_initialize(params):
                return _error(-32602, INIT_PARAMS_MESSAGE, rpc_id)
            asked = params["protocolVersion"]
            version = asked if asked in SUPPORTED_VERSIONS else LATEST_VERSION
            return _result(
                {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": self._server_info()},
                rpc_id,
            )
        if method == "ping":  # MCP requires an empty result
            return _result({}, rpc_id)
        if method == "tools/list":
            return _result(self._tools_list, rpc_id)
        if method == "tools/call":
            return self._tools_call(rid, rpc_id, params, bytes_in)
        return _error(-32601, "Method not found", rpc_id)  # the method name is never echoed

    def _tools_call(self, rid: str, rpc_id: Any, params: Any, bytes_in: int) -> bytes | PendingCall:
        if params is None:  # no tool events
            return _error(-32602, "Missing params", rpc_id)
        if isinstance(params, dict):
            raw_name = params.get("name")
            name = raw_name if isinstance(raw_name, str) else ""
            arguments = params["arguments"] if "arguments" in params else {}
        else:
            name, arguments = "", {}
        tool = self._tools.get(name)
        takes_decision = tool is None or tool.takes_decision
        logger = self.logger
        start = (rid, rpc_id, bytes_in, _compact_len(arguments))
        if takes_decision:  # unknown names are metered too; the identity tool is not
            logger.emit_pair(_METERED, (), _START, start)
        else:
            logger.emit(_START, *start)
        return PendingCall(
            rid,
            rpc_id,
            tool.name if tool is not None else "unknown",
            takes_decision,
            _correlation(params),
            self._clock(),
            tool.run if tool is not None else None,
            arguments,
            self.ctx,
            self.ctx_inline if tool is not None and tool.inline else None,
        )

    # -- completion -------------------------------------------------------------

    def complete(
        self,
        call: PendingCall,
        payload: dict[str, Any] | None = None,
        *,
        failed: bool = False,
        timed_out: bool = False,
    ) -> bytes:
        """Build the CallToolResult. ``failed``/``timed_out`` select the fixed E_INTERNAL/E_TIMEOUT payloads."""
        duration_ms = max(0, int((self._clock() - call.started) * 1000))
        ids = {"rid": call.rid, "rpc_id": call.rpc_id}
        if timed_out:
            payload = TIMEOUT_PAYLOAD()
            self.logger.event(
                "WARN", TARGET_SERVER, "tool_call_timeout", **ids, duration_ms=duration_ms, code="E_TIMEOUT"
            )
        elif failed or not isinstance(payload, dict):
            payload = INTERNAL_PAYLOAD()
            self.logger.event(
                "ERROR", TARGET_SERVER, "tool_execution_error", **ids, duration_ms=duration_ms, code="E_INTERNAL"
            )
        is_error = is_error_payload(payload)
        error = payload.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        # tool_call_done: rid, rpc_id, duration_ms, outcome[, allowed][, code]
        done: list[Any] = [call.rid, call.rpc_id, duration_ms, "app_error" if error is not None else "ok"]
        if call.takes_decision:
            done.append(not is_error)
        if error is not None:
            done.append(code)
        logger = self.logger
        if call.takes_decision:
            decision = (call.rid, call.rpc_id, self._decision_record(call, payload, code))
            logger.emit_pair(_DONE[True, error is not None], tuple(done), _DECISION, decision)
        else:
            logger.emit(_DONE[False, error is not None], *done)
        text = payload.text if type(payload) is FixedPayload else payload_text(payload)
        return _tool_result(text, is_error, call.rpc_id)

    @staticmethod
    def _decision_record(call: PendingCall, payload: dict[str, Any], code: Any) -> Preencoded:
        """A minimal `assay.tool_decision_surface.v0` entry, as a JSON string."""
        if isinstance(code, str):
            effect, status = "error", code
        elif payload.get("allowed") is True:
            effect, status = "allow", "success"
        else:
            effect, status = "deny", "blocked"
        return _decision_json(call.tool_name, effect, status, call.correlation)

    # -- synchronous driver (tests, property checks) -----------------------------------------

    def pending_log(self) -> bytes:
        """Log lines queued since the last call (buffered logger), for the shell to write."""
        return self.logger.drain()

    def handle_blocking(self, frame: bytes | Oversize) -> bytes | None:
        """receive + run the handler as the shell does (inline first, else ``work``; no deadline)
        + complete."""
        out = self.receive(frame)
        if isinstance(out, PendingCall):
            try:
                payload = None
                if out.inline is not None:
                    try:
                        payload = out.inline()
                    except NeedsWorker:
                        payload = None
                if payload is None:
                    payload = out.work()
            except Exception:
                return self.complete(out, failed=True)
            return self.complete(out, payload)
        return out
