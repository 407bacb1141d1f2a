"""What wrap learns from the server's tools/list answers: chains, pins and tool identities, the
declared baseline, the tools that declare an ``outputSchema``, and hiding (sans-IO).

docs/wrap.md, "Tool pins", "Declared baseline", "Hiding denied tools" and "Dropped server
responses" describe what is read and when.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from assay.policy import Policy, SessionState, tool_identity
from assay.session import records, serverlines
from assay.session.effects import Effect, Warn
from assay.session.listing import ListChain, denied_by_name, hide_tools, tool_definition_digest
from assay.session.pending import Key, PendingTable

if TYPE_CHECKING:
    from assay.session.baseline import Baseline

__all__ = ["ListedTools", "ToolBook"]

# (tool definition, tool-definition digest, schema hash, meta hash, effects): Ledger.tool_listed
OnSeen = Callable[[dict[str, Any], "str | None", str, str, list[Effect]], None]


class ListedTools(Protocol):
    """What the tool book asks of the inspection room (:class:`assay.session.inspection.Inspector`,
    which imports this module): the names a ``tools/list`` answer's definitions leave out."""

    def listed(self, tools: list[Any], out: list[Effect]) -> set[str]: ...


def read_message(line: bytes) -> Any:
    """The whole line, read at least as leniently as the clients read it."""
    return serverlines.read_line(line)


class ToolBook:
    """The tools/list requests in flight and what their answers said."""

    __slots__ = (
        "policy",
        "state",
        "label",
        "verbose",
        "hide",
        "baseline",
        "pending_lists",
        "chains",
        "last_chain",
        "output_schema_tools",
        "bindings",
        "on_seen",
        "inspector",
    )

    def __init__(
        self,
        policy: Policy,
        state: SessionState,
        label: str,
        *,
        verbose: bool,
        hide: bool,
        baseline: Baseline | None,
        on_seen: OnSeen | None = None,
    ) -> None:
        self.policy = policy
        self.state = state
        self.label = label
        self.verbose = verbose
        self.hide = hide  # --hide-denied-tools (never in a dry run)
        self.baseline = baseline
        self.pending_lists: set[Key] = set()  # ids of the client's tools/list requests in flight
        self.chains: dict[Key, ListChain] = {}
        self.last_chain: ListChain | None = None
        self.output_schema_tools: set[str] = set()  # tools listed with an outputSchema
        self.bindings: dict[str, str] = {}  # tool name -> tool-definition digest
        # with a decision log: records each newly seen tool (docs/wrap-records.md, "Tools seen")
        self.on_seen = on_seen
        # the inspection room: reads tool definitions (docs/policy.md, "Inspecting what comes back")
        self.inspector: ListedTools | None = None

    def listed(self, key: Key, params: Any) -> None:
        """The client sent a tools/list request with id ``key``. It continues the last chain
        when it asks for that chain's ``nextCursor``; otherwise it starts a new one."""
        self.pending_lists.add(key)
        cursor = params.get("cursor") if isinstance(params, dict) else None
        last = self.last_chain
        if isinstance(cursor, str) and last is not None and last.next_cursor == cursor:
            self.chains[key] = last
        else:
            self.chains[key] = ListChain()

    def answered(self, key: Key, pending: PendingTable) -> ListChain | None:
        """An answer with id ``key`` arrived while a tools/list with that id was pending: its
        chain, if it has one. A client that reuses an id in flight hands the first answer to
        its latest request with that id (both SDKs keep one handler per id), so any answer to
        such an id is read as a tools/list answer, and the id counts as a pending tools/list
        until no request with it is left (docs/wrap.md, "Dropped server responses")."""
        if key not in pending:
            self.pending_lists.discard(key)
        return self.chains.pop(key, None)

    def unreadable(self, out: list[Effect]) -> None:
        """A line that may answer tools/list was not read: pinned and declared tools have an
        unknown identity from now on (docs/wrap.md, "Tool pins", "Declared baseline")."""
        if not self.pending_lists:
            return
        if self.baseline is not None:
            self.baseline.mark_unreadable()
        if self.state.unreadable:
            return
        self.state.mark_unreadable()
        out.append(Warn(records.unreadable_answer_warning()))

    def answer(
        self, key: Key, message: dict[str, Any], line: bytes, pending: PendingTable, out: list[Effect]
    ) -> bool | bytes:
        """Record tool identities from the answer to one of the client's tools/list requests
        (pins, the declared baseline and the observed manifest see every tool the server
        listed); True to relay the line, or the line with tools hidden (--hide-denied-tools)."""
        chain = self.answered(key, pending)
        result = message.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return True
        tools = result["tools"]
        if chain is not None:
            chain.add_page(tools, result.get("nextCursor"))
            self.last_chain = chain
        label = self.label
        seen = self.state.observe_tools(label, tools)
        baseline = self.baseline
        if baseline is not None:
            baseline.observe(tools)
        alternative = _other_reading(line)
        if alternative is not None:  # a client that drops invalid UTF-8 instead of replacing it
            seen += self.state.observe_tools(label, alternative)
            if baseline is not None:
                baseline.observe(alternative)
            tools = tools + alternative
        for tool in tools:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str) and tool["name"].strip():
                name = tool["name"]
                if tool.get("outputSchema") is not None:
                    self.output_schema_tools.add(name)
                digest = tool_definition_digest(tool, label)
                if digest is None:
                    self.bindings.pop(name, None)
                else:
                    self.bindings[name] = digest
        if self.verbose:
            out.extend(Warn(records.tool_identity_line(n, label, s, m)) for (n, s, m) in seen)
        if seen and self.on_seen is not None:
            self._record_seen(tools, seen, out)
        poisoned: set[str] = set()
        if self.inspector is not None:
            poisoned = self.inspector.listed(tools, out)
        if poisoned:  # poisoned definitions never reach the client: cut, or written anew
            hide = self.hide

            def hidden(name: str) -> bool:
                return name in poisoned or (hide and self.hidden(name))

            cut = hide_tools(line, message, hidden, read_message)
            return cut if cut is not None else _without(message, hidden)
        if self.hide:
            cut = hide_tools(line, message, self.hidden, read_message)
            if cut is not None:
                return cut
        return True

    def _record_seen(self, tools: list[Any], seen: list[tuple[str, str, str]], out: list[Effect]) -> None:
        """An ``assay.tool.listed`` event for each tool of ``seen`` (the newly seen identities,
        in list order), made from the definition in ``tools`` that has that identity."""
        on_seen = self.on_seen
        assert on_seen is not None
        at = 0
        for name, schema_hash, meta_hash in seen:
            while at < len(tools):
                tool = tools[at]
                at += 1
                if (
                    isinstance(tool, dict)
                    and tool.get("name") == name
                    and tool_identity(tool) == (schema_hash, meta_hash)
                ):
                    on_seen(tool, tool_definition_digest(tool, self.label), schema_hash, meta_hash, out)
                    break

    def hidden(self, name: str) -> bool:
        """Whether --hide-denied-tools takes ``name`` out of the tools/list answers: the policy
        denies it by name or class, or the declared baseline does not hold it (docs/wrap.md,
        "Hiding denied tools")."""
        if self.baseline is not None and not self.baseline.declares(name):
            return True
        return denied_by_name(self.policy, name)

    def may_have_output_schema(self, name: str) -> bool:
        """Whether a definition of ``name`` that reached the client may declare an
        ``outputSchema`` (then a deny carries no ``structuredContent``, docs/wrap.md, "Deny
        replies"): it did, or wrap could not read some tools/list answer or its duplicates."""
        return name in self.output_schema_tools or self.state.unreadable


def _without(message: dict[str, Any], hidden: Callable[[str], bool]) -> bytes:
    """The tools/list answer written anew without the hidden tools (ASCII escapes): what is
    relayed when the line cannot be cut in place. An answer that cannot be written becomes an
    empty list of tools."""
    import json

    result = dict(message["result"])
    result["tools"] = [
        t for t in result["tools"] if not (isinstance(t, dict) and isinstance(t.get("name"), str) and hidden(t["name"]))
    ]
    out = dict(message)
    out["result"] = result
    try:
        return json.dumps(out, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")
    except (TypeError, ValueError, RecursionError):
        empty: dict[str, Any] = {"jsonrpc": "2.0", "id": message.get("id"), "result": {"tools": []}}
        try:
            return json.dumps(empty, ensure_ascii=True, separators=(",", ":")).encode("ascii")
        except (TypeError, ValueError, RecursionError):
            return b'{"jsonrpc":"2.0","id":null,"result":{"tools":[]}}'


def _other_reading(line: bytes) -> list[Any] | None:
    """The tools of a line with invalid UTF-8 read with the bytes dropped (a Python client
    with ``errors="ignore"``): its definitions reach that client too. None otherwise."""
    try:
        line.decode("utf-8")
        return None
    except UnicodeDecodeError:
        pass
    message = serverlines.read_text(line.decode("utf-8", "ignore"))
    if message.__class__ is not dict:
        return None
    result = message.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
        return None
    tools: list[Any] = result["tools"]
    return tools
