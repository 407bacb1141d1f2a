"""The state of one Streamable HTTP session and how a POST's answer is read (docs/remote.md,
"Transports", "Answers and streams").

:class:`HttpSession` is what the transports share: the target and the client, the session id
and the negotiated version, the legacy endpoint, the tools' ``x-mcp-header`` marks, the headers
of a request, and the reading of an answer (a JSON body or an event stream). The dispatch of
requests (:class:`assay.shells.upstream_http.http.HttpServer`), the legacy transport
(:mod:`assay.shells.upstream_http.legacy`) and the GET streams (:mod:`assay.shells.upstream_http.resume`) build on it, so
none of them imports another's module back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2
import trio

from assay.shells.upstream_http.messages import Incoming, Outgoing, as_line, header_safe, incoming
from assay.shells.upstream_http.params import header_map, param_headers
from assay.shells.upstream_http.streams import StreamEnd, read_body, read_events
from assay.shells.upstream_http.target import Target
from assay.shells.upstream_http.upstream import RemoteServer

__all__ = ["ACCEPT_BOTH", "HttpSession", "MAX_MARKED_TOOLS", "status_text"]

MAX_MARKED_TOOLS = 10000  # tools whose x-mcp-header marks are kept
ACCEPT_BOTH = "application/json, text/event-stream"


def status_text(status: int) -> str:
    """What an HTTP error status means to the user (the one place: docs/remote.md, "When the
    server fails")."""
    if status == 401:
        return "the server refused the request (HTTP 401: authorization needed)"
    if status == 403:
        return "the server refused the request (HTTP 403: forbidden)"
    return f"the server answered HTTP {status}"


class HttpSession(RemoteServer):
    """One HTTP session's state and answers (see the module docstring)."""

    def __init__(
        self,
        target: Target,
        client: httpx2.AsyncClient,
        *,
        cap: int,
        warn: Callable[[str], None],
        needs_login: tuple[type[BaseException], ...] = (),
        connect_timeout: float = 15.0,
    ) -> None:
        super().__init__(cap=cap, warn=warn)
        self.target = target
        self.client = client
        self.needs_login = needs_login
        self.connect_timeout = connect_timeout  # also the legacy stream's wait for its endpoint
        self.mode = "sse" if target.transport == "sse" else "streamable"
        self.settled = target.transport != "auto"  # the transport is known
        self.session_id: str | None = None
        self.version: str | None = None  # the negotiated version (2025 era)
        self.endpoint: str | None = None  # where the legacy transport POSTs
        self.endpoint_set = trio.Event()
        self.get_opened: trio.Event | None = None  # set once the session's GET stream has its head
        self.marks: dict[str, dict[tuple[str, ...], str]] = {}  # tool -> its x-mcp-header marks

    def on_answer(self, method: str | None, seen: Incoming) -> str | None:
        """Learn the ``x-mcp-header`` marks of the tools a ``tools/list`` answer lists, and the
        version an ``initialize`` answer negotiated (refused when it cannot be a header)."""
        if method == "initialize":
            version = seen.protocol_version
            if version is not None:
                if not header_safe(version):
                    return (
                        "the server's protocolVersion cannot be sent back in the MCP-Protocol-Version header "
                        "(it is not printable ASCII)"
                    )
                self.version = version
        if method != "tools/list" or not isinstance(seen.result, dict):
            return None
        tools = seen.result.get("tools")
        for tool in tools if isinstance(tools, list) else ():
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            marks = header_map(tool.get("inputSchema"))
            if marks and (tool["name"] in self.marks or len(self.marks) < MAX_MARKED_TOOLS):
                self.marks[tool["name"]] = marks
            else:
                self.marks.pop(tool["name"], None)
        return None

    def headers(self, out: Outgoing | None) -> dict[str, str]:
        """The headers of a request about ``out`` (None: a GET stream of the session)."""
        headers = (
            {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
            if out is not None
            else {"Accept": "text/event-stream"}
        )
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if out is not None and out.headers:
            headers.update(out.headers)
            marks = self.marks.get(out.name) if out.name is not None else None
            if marks:
                headers.update(param_headers(marks, out.arguments))
        elif self.version is not None:
            headers["MCP-Protocol-Version"] = self.version
        return headers

    async def read_answer(self, resp: httpx2.Response, out: Outgoing, key: Any) -> StreamEnd | None:
        """Relay what a POST's answer carries; an event stream's end, for :meth:`_after_stream`."""
        status = resp.status_code
        kind = resp.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream" and 200 <= status < 300:
            return await read_events(self, resp, key)
        body = getattr(resp, "_assay_body", None)
        if body is None:
            body = await read_body(self, resp)
        if body is None:
            self.answer_error(key, f"assay: upstream error: the server's answer is longer than {self.cap} bytes")
            return None
        line = as_line(body) if kind == "application/json" or status >= 300 else None
        seen = incoming(line) if line is not None else None
        if line is not None and seen is not None and (seen.kind == "response" or 200 <= status < 300):
            self.emit(line, seen)
        if self.is_pending(key) and status >= 300:
            text = status_text(status)
            self.warn_once(f"http{status}", f"[assay] upstream: {text}")
            self.answer_error(key, f"assay: upstream error: {text}", {"status": status})
        elif self.is_pending(key) and kind not in ("application/json",):
            self.answer_error(
                key, f"assay: upstream error: the server answered {kind or 'no content'} without the answer"
            )
        return None

    def login_needed(self, text: str, key: Any) -> None:
        self.warn_once("login", f"[assay] {text}")
        self.answer_error(key, f"assay: upstream error: {text}")
