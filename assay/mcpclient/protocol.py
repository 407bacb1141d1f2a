"""The listing conversation of `assay mcp tools`, sans-IO (docs/tools.md, "How it talks to a
server"): one JSON-RPC line at a time in, the lines to send out.

1. ``initialize`` (id 1) with :data:`PROTOCOL_VERSION`; whatever version the server answers is
   accepted and reported (the ``tools/list`` exchange is the same in every version);
2. ``notifications/initialized``, then ``tools/list`` (id 2, 3, ...), following ``nextCursor``
   for at most :data:`MAX_PAGES` pages and :data:`MAX_TOOLS` tools;
3. done: the caller closes the server's stdin and ends it.

The server's own requests are answered (``ping`` with ``{}``, anything else with ``-32601``),
its notifications and lines that are not JSON-RPC (some servers log on stdout) are skipped, up
to :data:`MAX_SKIPPED` lines. Every failure is a :class:`ListingError` with one line saying
what went wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from assay._version import __version__

__all__ = ["MAX_PAGES", "MAX_SKIPPED", "MAX_TOOLS", "PROTOCOL_VERSION", "Listing", "ListingClient", "ListingError"]

PROTOCOL_VERSION = "2025-11-25"
MAX_PAGES = 100
MAX_TOOLS = 10_000
MAX_SKIPPED = 1_000


class ListingError(Exception):
    """The conversation failed; ``str`` is one line."""


@dataclass
class Listing:
    """What the server said: its protocol version, its ``serverInfo`` and its tools (raw
    objects, in the order listed)."""

    protocol_version: str = ""
    server_info: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    pages: int = 0
    skipped: int = 0


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def _short(value: Any, limit: int = 200) -> str:
    text = " ".join(str(value).split())
    text = text if text.isprintable() else text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[:limit] + "..."


class ListingClient:
    """One listing conversation. :meth:`start` gives the first line; :meth:`receive` takes each
    line the server writes and gives the lines to answer with; :attr:`done` says the listing is
    complete (then :attr:`listing` holds it)."""

    def __init__(self, *, max_pages: int = MAX_PAGES, max_tools: int = MAX_TOOLS) -> None:
        self.listing = Listing()
        self.max_pages = max_pages
        self.max_tools = max_tools
        self.phase = "new"  # new -> initializing -> listing -> done
        self._next_id = 1
        self._waiting: int | None = None

    @property
    def done(self) -> bool:
        return self.phase == "done"

    @property
    def waiting_for(self) -> str:
        """What the server has not answered yet, for a message (``initialize``, ``tools/list``)."""
        return "initialize" if self.phase in ("new", "initializing") else "tools/list"

    def _request(self, method: str, params: dict[str, Any]) -> bytes:
        rid = self._next_id
        self._next_id += 1
        self._waiting = rid
        return _line({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})

    def start(self) -> bytes:
        self.phase = "initializing"
        return self._request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "assay-mcp-tools", "version": __version__},
            },
        )

    def too_long(self, size: int) -> ListingError:
        return ListingError(f"a line of {size} bytes from the server is over the frame limit")

    def receive(self, line: bytes) -> list[bytes]:
        """One line the server wrote (terminator included or not)."""
        if self.done or not line.strip():
            return []
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            return self._skip()
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return self._skip()
        if "method" in msg:
            if "id" not in msg:
                return []  # a notification (logging, list_changed): nothing to do
            if msg.get("method") == "ping":
                return [_line({"jsonrpc": "2.0", "id": msg["id"], "result": {}})]
            return [
                _line(
                    {
                        "jsonrpc": "2.0",
                        "id": msg["id"],
                        "error": {"code": -32601, "message": "assay mcp tools only lists tools"},
                    }
                )
            ]
        if msg.get("id") != self._waiting or self._waiting is None:
            return self._skip()  # an answer to nothing we asked
        self._waiting = None
        if "error" in msg:
            err = msg["error"] if isinstance(msg["error"], dict) else {}
            raise ListingError(
                f"the server answered {self.waiting_for} with error {_short(err.get('code'))}: "
                f"{_short(err.get('message'))}"
            )
        result = msg.get("result")
        if not isinstance(result, dict):
            raise ListingError(f"the server's answer to {self.waiting_for} has no result object")
        if self.phase == "initializing":
            return self._initialized(result)
        return self._page(result)

    def _skip(self) -> list[bytes]:
        self.listing.skipped += 1
        if self.listing.skipped > MAX_SKIPPED:
            raise ListingError(f"more than {MAX_SKIPPED} lines from the server are not JSON-RPC answers")
        return []

    def _initialized(self, result: dict[str, Any]) -> list[bytes]:
        version = result.get("protocolVersion")
        if not isinstance(version, str) or not version:
            raise ListingError("the server's initialize result has no protocolVersion")
        self.listing.protocol_version = version
        info = result.get("serverInfo")
        self.listing.server_info = info if isinstance(info, dict) else {}
        caps = result.get("capabilities")
        if isinstance(caps, dict) and "tools" not in caps:
            self.phase = "done"  # the server offers no tools: nothing to list
            return [_line({"jsonrpc": "2.0", "method": "notifications/initialized"})]
        self.phase = "listing"
        return [_line({"jsonrpc": "2.0", "method": "notifications/initialized"}), self._request("tools/list", {})]

    def _page(self, result: dict[str, Any]) -> list[bytes]:
        tools = result.get("tools")
        if not isinstance(tools, list):
            raise ListingError("the server's tools/list result has no tools list")
        listing = self.listing
        listing.pages += 1
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                raise ListingError(f"tools/list page {listing.pages} holds a tool without a string name")
            listing.tools.append(tool)
        if len(listing.tools) > self.max_tools:
            raise ListingError(f"the server lists more than {self.max_tools} tools")
        cursor = result.get("nextCursor")
        if cursor is None or cursor == "":
            self.phase = "done"
            return []
        if not isinstance(cursor, str):
            raise ListingError("the server's nextCursor is not a string")
        if listing.pages >= self.max_pages:
            raise ListingError(f"the server's tools/list goes on past {self.max_pages} pages")
        return [self._request("tools/list", {"cursor": cursor})]
