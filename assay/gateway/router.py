"""The gateway's routing, sans-IO (docs/serve.md, "Upstreams and the agent session of a user").

One user's client sees one MCP server; behind it are the upstreams of the config, each reached
through its own guarded link. This module holds what that takes as plain values: which way a
client method goes (:func:`route_of`), the prefixed names (:class:`Names`), where a resource URI
lives (:class:`UriBook`), the merged lists, the ``initialize`` answer, the ids and progress
tokens of one user's conversations toward the links and back (:class:`Ids`), and the shape of a
2026-07-28 result. No trio, no I/O: :mod:`assay.serve.gateway` moves the messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from assay._version import __version__
from assay.gateway.http import CLIENT_INFO_META, LEGACY_VERSIONS, MODERN_VERSIONS, VERSION_META

__all__ = [
    "INVALID_PARAMS",
    "METHOD_NOT_FOUND",
    "UPSTREAM_FAILED",
    "FANOUT_KEYS",
    "Ids",
    "Names",
    "Route",
    "UriBook",
    "client_info",
    "error",
    "for_era",
    "initialize_result",
    "is_modern",
    "link_version",
    "negotiate",
    "route_of",
    "target_of",
]

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
#: an upstream that cannot answer (not started, failed, stopped): wrap's code for a lost server
UPSTREAM_FAILED = -32000

SERVER_NAME = "assay-serve"


class Route(Enum):
    """Which way a client request goes."""

    LOCAL = "local"  # answered by the gateway itself (ping, logging/setLevel)
    FANOUT = "fanout"  # every upstream, every page, merged
    BY_NAME = "by_name"  # the upstream named by the prefix of params.name
    BY_URI = "by_uri"  # the upstream that listed params.uri
    BY_REF = "by_ref"  # completion/complete: params.ref (a prompt's name or a resource's URI)
    UNKNOWN = "unknown"


_ROUTES: dict[str, Route] = {
    "ping": Route.LOCAL,
    "logging/setLevel": Route.LOCAL,
    "tools/list": Route.FANOUT,
    "resources/list": Route.FANOUT,
    "resources/templates/list": Route.FANOUT,
    "prompts/list": Route.FANOUT,
    "tools/call": Route.BY_NAME,
    "prompts/get": Route.BY_NAME,
    "resources/read": Route.BY_URI,
    "resources/subscribe": Route.BY_URI,
    "resources/unsubscribe": Route.BY_URI,
    "completion/complete": Route.BY_REF,
}

#: a fan-out method -> the member of its result that lists the items
FANOUT_KEYS = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}


def route_of(method: str) -> Route:
    return _ROUTES.get(method, Route.UNKNOWN)


def error(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


# -- initialize ----------------------------------------------------------------------------------


def negotiate(requested: Any) -> str:
    """The protocol version the gateway answers: the client's when it knows it, else its newest."""
    if isinstance(requested, str) and requested in (*MODERN_VERSIONS, *LEGACY_VERSIONS):
        return requested
    return LEGACY_VERSIONS[0]


def is_modern(version: str) -> bool:
    return version in MODERN_VERSIONS


def link_version(version: str) -> str:
    """The version a link's handshake asks the upstream for: the client's 2025-era one, or the
    newest of that era for a 2026-07-28 client (a link is always a session of its own)."""
    return version if version in LEGACY_VERSIONS else LEGACY_VERSIONS[0]


def initialize_result(version: str, instructions: str | None = None) -> dict[str, Any]:
    """The gateway's own ``initialize`` answer: tools, resources, prompts and completions, each
    list with ``listChanged`` (the gateway merges the upstreams' changes)."""
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": {
            "tools": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "prompts": {"listChanged": True},
            "completions": {},
            "logging": {},
        },
        "serverInfo": {"name": SERVER_NAME, "version": __version__},
    }
    if instructions:
        result["instructions"] = instructions
    return result


#: characters of a client's name or version kept for the records (docs/serve.md, "Records")
CLIENT_TEXT_MAX = 128


def client_info(params: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """The client an ``initialize`` names, as the records carry it (docs/serve.md, "Records"):
    (name, version) of its ``clientInfo``, or for a 2026-07-28 request of its ``_meta``'s
    ``io.modelcontextprotocol/clientInfo`` (optional there: None without it). Each string cut to
    :data:`CLIENT_TEXT_MAX` characters, every character that is not printable (controls, escapes,
    bidi and other format controls, line separators, lone surrogates) replaced by U+FFFD, so a
    terminal shows a record as it is; a version that is not a string is None."""
    meta = params.get("_meta")
    if isinstance(meta, dict) and VERSION_META in meta:
        info = meta.get(CLIENT_INFO_META)
    else:
        info = params.get("clientInfo")
    if not isinstance(info, dict):
        return None
    name = _record_text(info.get("name"))
    return None if name is None else (name, _record_text(info.get("version")))


def _record_text(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    value = value[:CLIENT_TEXT_MAX]
    return value if value.isprintable() else "".join(c if c.isprintable() else "\ufffd" for c in value)


def for_era(result: dict[str, Any], method: str, modern: bool) -> dict[str, Any]:
    """A result as the client's era has it: a 2026-07-28 result says it is complete, and a list of
    tools that it is this user's and not to be cached."""
    if not modern:
        return result
    shaped = {"resultType": "complete", **result}
    if method == "tools/list":
        shaped.setdefault("ttlMs", 0)
        shaped.setdefault("cacheScope", "private")
    return shaped


def modern_params(message: Mapping[str, Any]) -> bool:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and VERSION_META in meta


# -- names ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Names:
    """``<upstream><separator><name>``: the names the client sees (tools, prompts)."""

    upstreams: tuple[str, ...]
    separator: str = "__"

    def join(self, upstream: str, name: str) -> str:
        return f"{upstream}{self.separator}{name}"

    def split(self, name: Any) -> tuple[str, str] | None:
        """(upstream, the upstream's own name), or None when no upstream's prefix starts it (the
        longest prefix wins, so ``a`` and ``a__b`` can both be upstreams)."""
        if not isinstance(name, str):
            return None
        best: str | None = None
        for upstream in self.upstreams:
            head = upstream + self.separator
            if name.startswith(head) and len(name) > len(head) and (best is None or len(upstream) > len(best)):
                best = upstream
        if best is None:
            return None
        return best, name[len(best) + len(self.separator) :]

    def prefixed(self, method: str, upstream: str, items: Iterable[Any]) -> list[Any]:
        """The items of one upstream's list as the client sees them: tools and prompts renamed;
        resources and templates as they are (their URIs are routed by :class:`UriBook`)."""
        renames = method in ("tools/list", "prompts/list")
        out: list[Any] = []
        for item in items:
            if not isinstance(item, dict):
                continue
            if renames:
                if not isinstance(item.get("name"), str):
                    continue
                item = {**item, "name": self.join(upstream, item["name"])}
            out.append(item)
        return out


def target_of(method: str, params: Mapping[str, Any], names: Names, uris: UriBook) -> tuple[str, dict[str, Any]] | str:
    """Where a routed request goes: (upstream, the params it gets, unprefixed), or why it cannot
    go anywhere (one line for an invalid-params error)."""
    route = route_of(method)
    if route is Route.BY_NAME:
        split = names.split(params.get("name"))
        if split is None:
            kind = "tool" if method == "tools/call" else "prompt"
            return f"Unknown {kind}: {params.get('name')!s:.200}"
        return split[0], {**params, "name": split[1]}
    if route is Route.BY_URI:
        upstream = uris.route(params.get("uri"))
        if upstream is None:
            return f"Unknown resource: {params.get('uri')!s:.200}"
        return upstream, dict(params)
    if route is Route.BY_REF:
        ref = params.get("ref")
        if not isinstance(ref, dict):
            return "completion/complete needs a ref"
        if ref.get("type") == "ref/prompt":
            split = names.split(ref.get("name"))
            if split is None:
                return f"Unknown prompt: {ref.get('name')!s:.200}"
            return split[0], {**params, "ref": {**ref, "name": split[1]}}
        upstream = uris.route(ref.get("uri"))
        if upstream is None:
            return f"Unknown resource: {ref.get('uri')!s:.200}"
        return upstream, dict(params)
    return f"Method not found: {method}"


# -- resources -----------------------------------------------------------------------------------


@dataclass
class UriBook:
    """Which upstream a resource URI belongs to, learnt from the lists one user's client was
    given: a URI a ``resources/list`` gave, else the longest literal head (the text before the
    first ``{``) of a template a ``resources/templates/list`` gave. A URI no list gave is not
    routed (docs/serve.md, "Upstreams and the agent session of a user").

    Bounded for every user: at most :attr:`LIMIT` URIs and as many templates, and
    :attr:`MAX_CHARS` characters of their text (each kind); past either, the least recently listed are
    forgotten first (listing them again learns them again)."""

    uris: dict[str, str] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)  # uriTemplate -> upstream
    #: characters of the URIs (templates) held, with their upstreams' names
    uri_chars: int = 0
    template_chars: int = 0
    LIMIT = 100_000
    MAX_CHARS = 8 << 20  # of each kind (at most 4 bytes a character in UTF-8)

    def learn(self, method: str, upstream: str, items: Iterable[Any]) -> None:
        for item in items:
            if not isinstance(item, dict):
                continue
            if method == "resources/list" and isinstance(item.get("uri"), str):
                self.uri_chars = _remember(self.uris, item["uri"], upstream, self.uri_chars, self.LIMIT, self.MAX_CHARS)
            elif method == "resources/templates/list" and isinstance(item.get("uriTemplate"), str):
                self.template_chars = _remember(
                    self.templates, item["uriTemplate"], upstream, self.template_chars, self.LIMIT, self.MAX_CHARS
                )

    def route(self, uri: Any) -> str | None:
        if not isinstance(uri, str):
            return None
        known = self.uris.get(uri) or self.templates.get(uri)
        if known is not None:
            return known
        best: tuple[int, str] | None = None
        for template, upstream in self.templates.items():
            head = template.split("{", 1)[0]
            if head and uri.startswith(head) and (best is None or len(head) > best[0]):
                best = (len(head), upstream)
        return None if best is None else best[1]


def _remember(book: dict[str, str], key: str, upstream: str, chars: int, limit: int, max_chars: int) -> int:
    """``book[key] = upstream``, as the most recent entry, the oldest ones forgotten while the
    book is over ``limit`` entries or ``max_chars`` characters; the characters it then holds."""
    cost = len(key) + len(upstream)
    if cost > max_chars:
        return chars  # one entry larger than the whole book: not learnt
    old = book.pop(key, None)
    if old is not None:
        chars -= len(key) + len(old)
    book[key] = upstream
    chars += cost
    while len(book) > limit or chars > max_chars:
        first = next(iter(book))
        chars -= len(first) + len(book.pop(first))
    return chars


# -- ids and tokens ------------------------------------------------------------------------------


@dataclass
class Ids:
    """The gateway's own ids: toward a link (every request it sends an upstream), toward a client
    (the upstream requests it hands a conversation), and the progress tokens it puts in the
    requests it forwards. Each maps back to whose it was, so two conversations' equal ids never
    meet."""

    counter: int = 0
    #: gateway token -> (conversation id, the client's token)
    tokens: dict[str, tuple[int, Any]] = field(default_factory=dict)
    #: gateway id toward a client -> (upstream, the upstream's request id)
    asked: dict[str, tuple[str, Any]] = field(default_factory=dict)
    #: characters of the upstreams' string ids in ``asked``
    asked_chars: int = 0
    #: upstream requests kept waiting for a client's answer, and the characters of their ids
    ASKED_MAX = 1024
    ASKED_CHARS_MAX = 1 << 20

    def new(self) -> int:
        self.counter += 1
        return self.counter

    def map_token(self, conversation: int, params: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """``params`` with its ``_meta.progressToken`` replaced by the gateway's own; the token."""
        meta = params.get("_meta")
        if not isinstance(meta, dict) or "progressToken" not in meta:
            return params, None
        token = f"p{self.new()}"
        self.tokens[token] = (conversation, meta["progressToken"])
        return {**params, "_meta": {**meta, "progressToken": token}}, token

    def progress(self, params: Any) -> tuple[int, dict[str, Any]] | None:
        """Whose a progress notification is: (conversation, its params with the client's token)."""
        if not isinstance(params, dict):
            return None
        token = params.get("progressToken")
        mapped = self.tokens.get(token) if isinstance(token, str) else None
        if mapped is None:
            return None
        return mapped[0], {**params, "progressToken": mapped[1]}

    def ask(self, upstream: str, upstream_id: Any) -> str:
        """A new id toward a client for the upstream's request ``upstream_id``. At most
        :attr:`ASKED_MAX` are kept waiting for the client's answer: past it the oldest is
        forgotten (its answer, should it come, then goes nowhere)."""
        mine = f"s{self.new()}"
        self.asked[mine] = (upstream, upstream_id)
        self.asked_chars += _id_chars(upstream_id)
        while len(self.asked) > self.ASKED_MAX or self.asked_chars > self.ASKED_CHARS_MAX:
            self.answered(next(iter(self.asked)))
        return mine

    def answered(self, mine: Any) -> tuple[str, Any] | None:
        """Whose the client's answer ``mine`` is (forgotten then); None when no upstream asked it."""
        found = self.asked.pop(mine, None) if isinstance(mine, str) else None
        if found is not None:
            self.asked_chars -= _id_chars(found[1])
        return found


def _id_chars(upstream_id: Any) -> int:
    return len(upstream_id) if isinstance(upstream_id, str) else 0


def merged(method: str, items: list[Any]) -> dict[str, Any]:
    return {FANOUT_KEYS[method]: items}
