"""The server's side of a wrap run: its lines, held or streamed, the client requests awaiting
their answers, and wrap's own replies, which wait while a long server line goes through
(sans-IO).

docs/wrap.md, "Dropped server responses", says which lines reach the client; "Tool pins" what
a tools/list answer feeds (:mod:`assay.session.toolbook`).
"""

from __future__ import annotations

import enum
import struct
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from assay.session import records, serverlines
from assay.session.effects import Effect, ToClient, Warn
from assay.session.heads import Head as _Head
from assay.session.heads import read_head as _read_head
from assay.session.watching import Watch
from assay.session.pending import Key, PendingTable
from assay.session.toolbook import ToolBook, read_message

if TYPE_CHECKING:
    from assay.session.server_messages import ServerMessages
    from assay.session.jobs import Job

__all__ = ["SERVER_HOLD_LIMIT", "AnswerReader", "ServerSide", "Stream"]

SERVER_HOLD_LIMIT = 64 << 20  # a server line is held whole (and read) up to this size
_HEAD_BYTES = 64 << 10  # of a line over the hold limit, what is kept to find the id it answers

_TOOLS_LIST = "tools/list"
_UNSET: Any = msgspec.UNSET
_RAW: Any = msgspec.Raw
_first_byte = struct.Struct("B").unpack_from  # (of a Raw: cheaper than a memoryview)


def _error_object(head: _Head) -> bool:
    """Whether the line's ``error`` is an object (next to a ``method`` and an ``id`` it makes
    the line the Python SDK's error answer)."""
    error = head.error
    return isinstance(error, msgspec.Raw) and memoryview(error)[:1].tobytes() == b"{"


class AnswerReader(Protocol):
    """What the server side asks of the inspection room (:class:`assay.session.inspection.Inspector`,
    which imports what this module imports): the answers and messages it reads before they are
    relayed."""

    @property
    def oversize(self) -> str: ...
    @property
    def messages(self) -> ServerMessages | None: ...

    # the merge of the answer just read, waiting for the line (docs/wrap.md, "Shared sessions")
    parked: Job | None

    def too_long(self, head: bytes, pending: PendingTable, out: list[Effect]) -> bool: ...

    def answer(
        self, watch: Watch, line: bytes, out: list[Effect], head: Any = None, gated: bool = False
    ) -> bool | bytes: ...


class Stream(enum.Enum):
    """How the server's bytes go to the client."""

    LINES = "lines"  # whole lines, each read; a partial one is held until its LF
    STREAMING = "streaming"  # a line longer than the hold limit is relayed as it comes, unread
    # a line longer than the hold limit that may answer a request whose answer must be read
    # first (docs/policy.md, "Inspecting what comes back", oversize: block): dropped to its LF
    DISCARDING = "discarding"


class ServerSide:
    """Server bytes in, client bytes out; the pending-request table; wrap's replies in order."""

    __slots__ = (
        "pending",
        "tools",
        "hold_limit",
        "prefix",
        "stream",
        "dropped_responses",
        "held_bytes",
        "_tail",
        "_held",
        "inspector",
    )

    def __init__(self, tools: ToolBook, hold_limit: int, approval_prefix: str | None) -> None:
        self.pending = PendingTable()
        self.tools = tools
        self.hold_limit = hold_limit
        self.prefix = approval_prefix  # the ids of wrap's own requests to the client (None: none)
        self.stream = Stream.LINES
        self.dropped_responses = 0
        self.held_bytes = 0  # size of the held replies: the shell stops reading the client past its bound
        self._tail = bytearray()  # a server line not yet ended
        self._held: list[bytes] = []  # wrap's replies waiting for a streamed line to end
        # the inspection room (docs/policy.md, "Inspecting what comes back"); None: nothing is read
        self.inspector: AnswerReader | None = None

    # -- what the client asked ---------------------------------------------------------------

    def request(self, request_id: Any, method: str | Watch, params: Any) -> None:
        """A client request goes to the server: its answer is awaited."""
        key = self.pending.add(request_id, method)
        if method == _TOOLS_LIST and key is not None:
            self.tools.listed(key, params)

    def reply(self, data: bytes, out: list[Effect]) -> None:
        """wrap's own line for the client; held while a long server line is being relayed."""
        if self.stream is Stream.STREAMING:
            self._held.append(data)
            self.held_bytes += len(data)
        else:
            out.append(ToClient(data))

    # -- server bytes ------------------------------------------------------------------------

    def receive(self, data: bytes, out: list[Effect]) -> None:
        """Bytes the child wrote: whole lines go to the client (forged answers dropped); a
        partial line is held until its LF, up to the hold limit, then streamed through."""
        if self.stream is Stream.STREAMING:
            nl = data.find(b"\n")
            if nl < 0:
                out.append(ToClient(data))
                return
            out.append(ToClient(data[: nl + 1]))
            self._end_streaming(out)
            data = data[nl + 1 :]
            if not data:
                return
        elif self.stream is Stream.DISCARDING:
            nl = data.find(b"\n")
            if nl < 0:
                return
            self.stream = Stream.LINES
            data = data[nl + 1 :]
            if not data:
                return
        cut = data.rfind(b"\n") + 1
        tail = self._tail
        if cut == 0:
            tail += data
            if len(tail) > self.hold_limit:
                self.tools.unreadable(out)
                inspector = self.inspector
                if (
                    inspector is not None
                    and inspector.oversize == "block"
                    and (inspector.messages is not None or self.pending.holds(Watch))
                    and inspector.too_long(bytes(tail[:_HEAD_BYTES]), self.pending, out)
                ):
                    self.stream = Stream.DISCARDING
                    self._tail = bytearray()
                    return
                self.stream = Stream.STREAMING
                out.append(ToClient(bytes(tail)))
                self._tail = bytearray()
            return
        if tail:
            tail += data[:cut]
            chunk = bytes(tail)
            self._tail = bytearray(data[cut:])
        else:
            chunk = data if cut == len(data) else data[:cut]
            if cut < len(data):
                self._tail = bytearray(data[cut:])
        kept = self._judge_lines(chunk, out)
        if kept:
            out.append(ToClient(kept))

    def _end_streaming(self, out: list[Effect]) -> None:
        self.stream = Stream.LINES
        if self._held:
            out.extend(ToClient(data) for data in self._held)
            self._held = []
            self.held_bytes = 0

    def closed(self, out: list[Effect]) -> None:
        """The child's stdout reached end of file."""
        if self.stream is Stream.DISCARDING:
            self.stream = Stream.LINES
        if self._tail and self.stream is Stream.LINES:
            # an unterminated last line: relayed as it is (it answers nothing wrap can match)
            out.append(ToClient(bytes(self._tail)))
        self._tail = bytearray()
        if self.stream is Stream.STREAMING:
            self._end_streaming(out)

    def _judge_lines(self, chunk: bytes, out: list[Effect]) -> bytes:
        """``chunk`` is whole LF-terminated lines: what of it goes to the client."""
        lines = chunk.split(b"\n")
        lines.pop()  # after the last LF
        keep: list[bytes] | None = None
        server_line = self.line
        for i, line in enumerate(lines):
            relay_it = server_line(line, out)
            if relay_it is True:
                if keep is not None:
                    keep.append(line)
                continue
            if keep is None:
                keep = lines[:i]
            if isinstance(relay_it, bytes):  # the line with tools hidden (--hide-denied-tools)
                keep.append(relay_it)
        if keep is None:
            return chunk
        return b"".join(line + b"\n" for line in keep)

    def line(self, line: bytes, out: list[Effect]) -> bool | bytes:
        """One complete server line (without its LF): True to relay it, False to drop it, or
        the bytes to relay instead (a tools/list answer with tools hidden).

        A response (no string ``method``, a ``result`` or an ``error``; or an ``error`` object
        and an ``id`` next to a ``method``, which the Python SDK reads as an error answer) is relayed
        only when its id answers a forwarded client request still awaiting its answer;
        otherwise it is dropped with one stderr line (docs/wrap.md, "Dropped server
        responses"). Requests, notifications and lines that are not JSON objects are relayed
        (read first when inspection reads them). A ``tools/list`` answer feeds the pin state.
        Never raises on content.

        Most lines are read for their four members only (``result`` and ``error`` are skipped,
        not built); a line that reading refuses (not an object, ``NaN``, a lone surrogate, very
        deep nesting) is read in full by the lenient readers instead.
        """
        try:
            head = _read_head(line)
        except (msgspec.DecodeError, RecursionError, ValueError, MemoryError):
            return self._message(read_message(line), line, out)
        has_id = head.id is not _UNSET
        if head.method.__class__ is str and not (has_id and _error_object(head)):
            return self._request(head.method, head.id, line, out)
        if head.result is _UNSET and head.error is _UNSET:
            return self._neither(head.id, line, out) if has_id else True
        rid = head.id if has_id else None
        found = self.pending.answer(rid)
        if found is None:
            self.dropped_responses += 1
            out.append(Warn(records.dropped_response_warning(rid, has_id)))
            return False
        key, method = found
        if method.__class__ is Watch:  # an answer inspection reads before it is relayed
            inspector = self.inspector
            assert inspector is not None
            quiet = method.quiet
            if quiet is not None:
                # a plain result (verdicts.plain_result from the members read: a result object,
                # no error; no method either, as a line with one and no error object is a
                # request) that the watch's line gate calls quiet is relayed at once
                result: Any = head.result
                if result.__class__ is _RAW and head.error is _UNSET and _first_byte(result)[0] == 0x7B:  # "{"
                    return True if quiet(line) else self._merged(inspector.answer(method, line, out, head, True), line)
            return self._merged(inspector.answer(method, line, out, head), line)
        if method == _TOOLS_LIST or key in self.tools.pending_lists:
            message = read_message(line)
            if message.__class__ is dict:
                return self.tools.answer(key, message, line, self.pending, out)
            # the head was read, the whole line was not (over the work budget): an answer
            # to tools/list that reaches the client unread (docs/wrap.md, "Tool pins")
            self.tools.unreadable(out)
            self.tools.answered(key, self.pending)
        return True

    def _request(self, method: str, request_id: Any, line: bytes, out: list[Effect]) -> bool | bytes:
        """A server request or notification is relayed, unless its id is one of this run's
        approval ids: the client's answer to it would be taken for a person's answer to wrap
        (docs/wrap.md, "Approvals"). The server cannot guess the run's random prefix; a line
        that uses it is dropped. With inspection, it is read first (the inspection room's
        :class:`~assay.session.server_messages.ServerMessages`)."""
        prefix = self.prefix
        if prefix is not None and request_id.__class__ is str and request_id.startswith(prefix):
            out.append(Warn(records.dropped_request_warning(method)))
            return False
        inspector = self.inspector
        if inspector is not None and inspector.messages is not None:
            return self._merged(inspector.messages.judge(method, line, out), line)
        return True

    def _neither(self, request_id: Any, line: bytes, out: list[Effect]) -> bool | bytes:
        """A line with an id and neither a ``method``, a ``result`` nor an ``error``: no client
        reads it, and it is relayed, unless it is the answer to a request whose answer
        inspection reads; then it is that answer, malformed (docs/inspect.md, "Malformed
        answers")."""
        inspector = self.inspector
        if inspector is None or self.pending.peek(request_id).__class__ is not Watch:
            return True
        found = self.pending.answer(request_id)
        assert found is not None
        return self._merged(inspector.answer(found[1], line, out), line)

    def _message(self, message: Any, line: bytes, out: list[Effect]) -> bool | bytes:
        """:meth:`line` for a line read in full."""
        if message.__class__ is not dict:
            if message is serverlines.TOO_HARD:
                self.tools.unreadable(out)
            return True
        has_id = "id" in message
        if message.get("method").__class__ is str and not (has_id and message.get("error").__class__ is dict):
            return self._request(message["method"], message.get("id", _UNSET), line, out)
        if "result" not in message and "error" not in message:
            return self._neither(message["id"], line, out) if has_id else True
        found = self.pending.answer(message.get("id"))
        if found is None:
            self.dropped_responses += 1
            out.append(Warn(records.dropped_response_warning(message.get("id"), "id" in message)))
            return False
        key, method = found
        if method.__class__ is Watch:
            assert self.inspector is not None
            return self._merged(self.inspector.answer(method, line, out), line)
        if method == _TOOLS_LIST or key in self.tools.pending_lists:
            return self.tools.answer(key, message, line, self.pending, out)
        return True

    def _merged(self, verdict: bool | bytes, line: bytes) -> bool | bytes:
        """An inspected line whose findings wait to be merged into the shared session's store
        (docs/wrap.md, "Shared sessions") is relayed once they are (the job's ``relay``, by
        :meth:`reply`), not now; other lines go on meanwhile."""
        inspector = self.inspector
        job = inspector.parked if inspector is not None else None
        if job is None:
            return verdict
        assert inspector is not None
        inspector.parked = None
        job.relay = line if verdict is True else verdict if verdict.__class__ is bytes else None
        return False

    def owes(self, key: Key) -> bool:
        """Whether a forwarded request with this id key still awaits its answer."""
        return key in self.pending
