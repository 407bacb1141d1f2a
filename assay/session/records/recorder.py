"""The records of one evaluated ``tools/call`` (docs/wrap-records.md, "Decision event", "Audit
record" and "How records are built"): the decision event line, the audit line, the
``--verbose`` line, and the session's coverage aggregate.

One implementation: every line is assembled from parts. The parts that depend only on the
decision (and the mode and the tool binding) are encoded once per kind of decision and kept in
a bounded template cache; the per-call parts (id, time, ``tool_call_id``, ``request_id``,
delegation, a fresh deny's contract) are encoded per call by the same JSON writer. A line whose
parts hold a lone surrogate is assembled from ASCII-escaped parts instead, which is what
encoding the whole record at once writes then (:func:`assay.session.records.encoding.encode_line`).

Sans-IO: ids and times come from injected sources (:mod:`assay.session.records.ids` by default).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

from assay.policy.decision import Decision, Outcome
from assay.session.records.coverage import Coverage
from assay.session.records.encoding import ABSENT, ascii_piece, has_id, piece
from assay.session.records.ids import batched_event_ids, cached_clock
from assay.session.records.listed import listed_data, listed_line, new_listed_id
from assay.session.records.messages import verbose_line
from assay.session.records.parts import (
    Origin,
    Template,
    after_id_bytes,
    audit_parts,
    audit_tail,
    cacheable,
    call_ids,
    event_bytes,
    event_parts,
    shape_of,
)

_ALLOW: Final = Outcome.ALLOW  # compared by identity on every recorded call
_DENY: Final = Outcome.DENY

__all__ = ["Recorded", "Recorder"]

_listed_id: Final = new_listed_id

_TEMPLATES_MAX: Final = 512  # templates kept per recorder (by decision object, and by kind)
_CLIENTS_MAX: Final = 4  # clients whose templates a gateway link's recorder keeps besides the current one


class Recorded(msgspec.Struct, gc=False):
    """What :meth:`Recorder.record` built for one call; None where that output is off.

    ``decision_line`` and ``audit_line`` are whole NDJSON lines (ending in ``\\n``),
    ``verbose`` the ``--verbose`` line without its newline. ``event_id`` is the decision
    event's id whenever an event was made (for the receipt): with a decision log, or with
    coverage on. A msgspec Struct, like the pipeline's ``Call``: one is built for every
    recorded call, in C."""

    decision_line: bytes | None = None
    audit_line: bytes | None = None
    verbose: str | None = None
    event_id: str | None = None


class Recorder:
    """The decision event, audit record and ``--verbose`` line of each evaluated ``tools/call``
    of one session, as one call (:meth:`record`), and the session's coverage aggregate.

    ``source`` is the event ``source`` (``--event-source``), ``label`` the server label
    (``--label``) and ``session`` the agent session key (``None``: the wrap shares no session),
    which every event and audit record carries as ``server`` and ``session``; ``dry_run`` the
    mode. ``decision_log``, ``audit_log`` and ``verbose`` say
    which lines to build; ``keep_events`` keeps :attr:`coverage` (a
    :class:`~assay.session.records.coverage.Coverage`, else None) for ``--coverage-out``.
    ``arguments_max`` (``--log-arguments``, else None) adds each call's ``params.arguments``,
    redacted and capped at that many bytes (:mod:`assay.session.records.arguments`), to both records,
    right after ``request_id``: it rides on the request id's part, so with the option off the
    per-call work is one test.
    ``new_event_id`` (default: ``evt_decision_<uuid4>`` from a batched random source) and
    ``now`` (default: the clock, RFC 3339 UTC) can be replaced, e.g. by tests; both are called
    once per recorded call, and the event and the audit record of one call carry the same time.
    ``subject`` (the user) and ``client_of`` (given a call's request id, the name and version of
    the client it came from, or None) are a gateway's (docs/serve.md, "Records"): both records
    then carry them after ``server``; wrap gives neither. So is ``client_id_of`` (given a call's
    request id, the id its client sent it with): ``request_id`` and ``tool_call_id`` are then the
    client's.

    The parts that depend on the decision alone (and on the session and server, the same for
    every call) are made once per decision object, or per kind of decision (every field but
    the deny contract): the policy engine returns the same
    :class:`Decision` for every plain call of a tool and a fresh one of the same kind for each
    schema deny, so the per-call work is the id, the time, ``tool_call_id``, ``request_id``,
    delegation and a fresh deny's contract.
    """

    __slots__ = (
        "source",
        "label",
        "session",
        "subject",
        "dry_run",
        "decision_log",
        "audit_log",
        "keep_events",
        "verbose",
        "coverage",
        "_new_id",
        "_now",
        "_fast_id",
        "_fast_time",
        "_templates",
        "_shapes",
        "_after_id",
        "_origin",
        "arguments_max",
        "_log_arguments",
        "_new_listed_id",
        "_client_of",
        "_client_id_of",
        "_client",
        "_by_client",
    )

    def __init__(
        self,
        *,
        source: str,
        label: str,
        dry_run: bool,
        decision_log: bool,
        audit_log: bool,
        keep_events: bool,
        verbose: bool,
        new_event_id: Callable[[], str] | None = None,
        now: Callable[[], str] | None = None,
        session: str | None = None,
        arguments_max: int | None = None,
        new_listed_id: Callable[[], str] | None = None,
        subject: str | None = None,
        client_of: Callable[[Any], tuple[str, str | None] | None] | None = None,
        client_id_of: Callable[[Any], Any] | None = None,
    ) -> None:
        self.source = source
        self.arguments_max = arguments_max  # --log-arguments: the cap in bytes; None: off
        # the redaction rules are compiled only when asked for: not on every wrap's start-up
        self._log_arguments: Callable[[Any, int], Any] | None = None
        if arguments_max is not None:
            from assay.session.records.arguments import logged_arguments

            self._log_arguments = logged_arguments
        self.label = label
        self.session = session
        self.dry_run = dry_run
        self.decision_log = decision_log
        self.audit_log = audit_log
        self.keep_events = keep_events
        self.verbose = verbose
        self.coverage: Coverage | None = Coverage() if keep_events else None
        self._fast_id = new_event_id is None  # our ids and times need no JSON escaping
        self._fast_time = now is None
        self._new_id: Callable[[], str] = new_event_id if new_event_id is not None else batched_event_ids()
        self._now: Callable[[], str] = now if now is not None else cached_clock()
        self._templates: dict[int, Template] = {}
        self._shapes: dict[tuple[Any, ...], Template] = {}
        self._after_id = after_id_bytes(source, piece)
        self.subject = subject
        self._origin = Origin(session, label, subject)
        self._new_listed_id: Callable[[], str] = new_listed_id if new_listed_id is not None else _listed_id
        # a gateway's link: the client of each call, asked by the call's request id (docs/serve.md,
        # "Records"); the templates of each client kept apart (their origin differs)
        self._client_of = client_of
        self._client_id_of = client_id_of
        self._client: tuple[str, str | None] | None = None
        self._by_client: dict[
            tuple[str, str | None] | None, tuple[Origin, dict[int, Template], dict[Any, Template]]
        ] = {}

    @property
    def active(self) -> bool:
        """Whether :meth:`record` builds anything at all."""
        return self.decision_log or self.audit_log or self.keep_events or self.verbose

    def record(
        self,
        decision: Decision,
        frame: Mapping[str, Any],
        params: Any,
        name: str,
        valid: bool,
        tool_definition_digest: str | None,
    ) -> Recorded:
        """The records of one evaluated call.

        ``frame`` is the client's request (its ``id`` member, or none), ``params`` its
        ``params``; ``name`` the evaluated tool name (``""`` when ``valid`` is False: params
        did not fit ``{name: string, ...}``); ``tool_definition_digest`` the binding of the
        tool's listed definition, or None.
        """
        dry_run = self.dry_run
        verbose = None
        if self.verbose:
            verbose = verbose_line(
                decision.outcome,
                name if valid else None,
                policy_code=decision.reason_code,
                reason=decision.reason,
                dry_run=dry_run,
            )
        decision_log, audit_log, coverage = self.decision_log, self.audit_log, self.coverage
        if coverage is not None:
            coverage.add(decision.tool, decision.tool_classes)
        if not (decision_log or audit_log):
            if coverage is None:
                return Recorded(None, None, verbose)
            self._now()  # called once per recorded call, whatever is built
            return Recorded(None, None, verbose, self._new_id())
        request_id = frame["id"] if "id" in frame else ABSENT
        if self._client_of is not None:
            self._for_client(self._client_of(None if request_id is ABSENT else request_id))
        if self._client_id_of is not None and request_id is not ABSENT:
            request_id = self._client_id_of(request_id)  # the id the client sent the call with
        stamp = self._now()
        template = self._templates.get(id(decision))
        # The engine returns the same object for every plain call of a tool, and a fresh one
        # (such as a schema deny) for each such call: those differ only in the deny contract.
        own = True
        if template is None or template.decision is not decision:
            shape = shape_of(decision)
            template = self._shapes.get(shape) if shape is not None else None
            if template is None:
                template = self._new_template(decision, shape)
            else:
                own = False
        rid: bytes | None
        if request_id.__class__ is int:
            rid = b',"request_id":' + str(request_id).encode("ascii")
        elif request_id is ABSENT or request_id is None:
            rid = b""
        else:
            request_piece = piece(request_id)
            rid = None if request_piece is None else b',"request_id":' + request_piece
        if self._log_arguments is not None and rid is not None:
            rid = self._arguments_part(params, rid, piece)  # None: a lone surrogate, all ASCII then
        time_part = (b'"' + stamp.encode("ascii") + b'"') if self._fast_time else piece(stamp)
        utf8 = rid is not None and time_part is not None
        event_id = None
        decision_line = None
        audit_line = None
        if decision_log or coverage is not None:
            event_id = self._new_id()
        if decision_log:
            assert event_id is not None  # made just above
            delegated_from, delegation_depth, tool_call_id, call_part = call_ids(params, request_id)
            if rid is not None and time_part is not None:  # else every line is ASCII-escaped
                events = template.events
                parts = (
                    events[tool_definition_digest]
                    if tool_definition_digest in events
                    else template.event(tool_definition_digest)
                )
                if parts is not None:
                    decision_line = self._event_line(
                        parts, event_id, time_part, delegated_from, delegation_depth, tool_call_id, call_part, rid
                    )
            if decision_line is None:
                decision_line = self._ascii_event_line(
                    decision,
                    tool_definition_digest,
                    event_id,
                    stamp,
                    delegated_from,
                    delegation_depth,
                    tool_call_id,
                    request_id,
                    params,
                )
        if audit_log:
            null_tool = not valid and decision.outcome is _ALLOW
            audit = None
            if utf8 and (null_tool or name is decision.tool or name == decision.tool):
                audit = template.audit(null_tool)
                if audit is not None and not own and decision.outcome is _DENY:
                    tail = audit_tail(decision.contract, piece)  # this decision's own contract
                    audit = None if tail is None else (audit[0], tail)
                elif audit is None and not own:
                    # the template's decision holds a lone surrogate (in its own deny contract,
                    # say) that this one may not: this decision's own parts, in UTF-8 if they can be
                    audit = audit_parts(
                        decision, dry_run, None if null_tool else name, decision.contract, self._origin, piece
                    )
            elif utf8:  # a name other than the decision's: not the engine's contract, but kept right
                audit = audit_parts(decision, dry_run, name, decision.contract, self._origin, piece)
            if audit is None or not utf8:
                time_part = ascii_piece(stamp)
                rid = b',"request_id":' + ascii_piece(request_id) if has_id(request_id) else b""
                if self._log_arguments is not None:
                    rid = self._arguments_part(params, rid, ascii_piece)
                audit = audit_parts(
                    decision, dry_run, None if null_tool else name, decision.contract, self._origin, ascii_piece
                )
                assert audit is not None
            assert time_part is not None and rid is not None
            audit_line = b"".join((b'{"timestamp":', time_part, audit[0], rid, audit[1]))
        return Recorded(decision_line, audit_line, verbose, event_id)

    def _for_client(self, client: tuple[str, str | None] | None) -> None:
        """Make ``client``'s origin and templates the current ones (a gateway's link serves the
        calls of several clients of one user, each recorded with its own)."""
        if client == self._client:
            return
        by_client = self._by_client
        by_client[self._client] = (self._origin, self._templates, self._shapes)
        kept = by_client.pop(client, None)
        if kept is None:
            if len(by_client) >= _CLIENTS_MAX:
                by_client.clear()  # bounded: a client's templates are made again when it comes back
            name, version = client if client is not None else (None, None)
            kept = (Origin(self.session, self.label, self.subject, name, version), {}, {})
        self._client = client
        self._origin, self._templates, self._shapes = kept

    def _arguments_part(self, params: Any, rid: bytes, enc: Callable[[Any], bytes | None]) -> bytes | None:
        """``rid`` and then ``,"arguments":<the logged value>`` when ``params`` has arguments
        (docs/wrap-records.md, "Logged arguments"); None when ``enc`` cannot encode it."""
        if params.__class__ is not dict or "arguments" not in params:
            return rid
        log_arguments = self._log_arguments
        assert log_arguments is not None and self.arguments_max is not None
        encoded = enc(log_arguments(params["arguments"], self.arguments_max))
        return None if encoded is None else rid + b',"arguments":' + encoded

    def tool_listed(self, tool: dict[str, Any], digest: str | None, schema_hash: str, meta_hash: str) -> bytes:
        """The ``assay.tool.listed`` line of a tool a ``tools/list`` answer showed for the first
        time, or with a new identity (docs/wrap-records.md, "Tools seen"); ``tool`` is its
        definition (an object with a non-blank string ``name``)."""
        data = listed_data(
            tool, server=self.label, session=self.session, digest=digest, schema_hash=schema_hash, meta_hash=meta_hash
        )
        return listed_line(self._new_listed_id(), self._now(), self.source, data)

    def client(self, **fields: Any) -> bytes:
        """The ``assay.client.capabilities`` line of what the client declared (docs/wrap-records.md,
        "The client"); ``fields`` are :func:`~assay.session.records.clients.client_data`'s."""
        from assay.session.records.clients import client_data, client_line, new_client_id

        data = client_data(session=self.session, server=self.label, **fields)
        return client_line(new_client_id(), self._now(), self.source, data)

    def inspected(self, **fields: Any) -> bytes:
        """The ``assay.response.inspected`` line of one inspection that found something
        (docs/wrap-records.md, "Inspection findings"); ``fields`` are
        :func:`~assay.session.records.inspected.inspected_data`'s."""
        from assay.session.records.inspected import inspected_data, inspected_line, new_inspected_id

        data = inspected_data(session=self.session, server=self.label, **fields)
        return inspected_line(new_inspected_id(), self._now(), self.source, data)

    def _new_template(self, decision: Decision, shape: tuple[Any, ...] | None) -> Template:
        template = Template(decision, self.dry_run, self._origin)
        if not cacheable(decision):
            return template  # used for this call only
        templates, shapes = self._templates, self._shapes
        if len(templates) >= _TEMPLATES_MAX:
            templates.clear()
        if len(shapes) >= _TEMPLATES_MAX:
            shapes.clear()
        templates[id(decision)] = template
        if shape is not None:
            shapes[shape] = template
        return template

    def _event_line(
        self,
        parts: tuple[bytes, bytes],
        event_id: str,
        time_part: bytes,
        delegated_from: str | None,
        delegation_depth: int | None,
        tool_call_id: str,
        call_part: bytes | None,
        rid: bytes,
    ) -> bytes | None:
        """The event line in UTF-8, or None when some part holds a lone surrogate."""
        after_id = self._after_id
        if after_id is None:
            return None
        id_part = (b'"' + event_id.encode("ascii") + b'"') if self._fast_id else piece(event_id)
        if call_part is None:
            call_part = piece(tool_call_id)
        if id_part is None or call_part is None:
            return None
        delegation = b""
        if delegated_from is not None:
            source = piece(delegated_from)
            if source is None:
                return None
            delegation = b',"delegated_from":' + source
        if delegation_depth is not None:
            delegation += b',"delegation_depth":' + str(delegation_depth).encode("ascii")
        return event_bytes(id_part, after_id, time_part, parts[0], delegation, parts[1], call_part, rid)

    def _ascii_event_line(
        self,
        decision: Decision,
        tool_definition_digest: str | None,
        event_id: str,
        stamp: str,
        delegated_from: str | None,
        delegation_depth: int | None,
        tool_call_id: str,
        request_id: Any,
        params: Any,
    ) -> bytes:
        """The event line of a call some part of which holds a lone surrogate: every part
        ASCII-escaped."""
        parts = event_parts(decision, self.dry_run, tool_definition_digest, self._origin, ascii_piece)
        assert parts is not None  # ASCII escapes encode everything
        head, verdict = parts
        delegation = b"" if delegated_from is None else b',"delegated_from":' + ascii_piece(delegated_from)
        if delegation_depth is not None:
            delegation += b',"delegation_depth":' + str(delegation_depth).encode("ascii")
        rid = b',"request_id":' + ascii_piece(request_id) if has_id(request_id) else b""
        if self._log_arguments is not None:
            found = self._arguments_part(params, rid, ascii_piece)
            assert found is not None  # ASCII escapes encode everything
            rid = found
        after_id = after_id_bytes(self.source, ascii_piece)
        assert after_id is not None
        return event_bytes(
            ascii_piece(event_id),
            after_id,
            ascii_piece(stamp),
            head,
            delegation,
            verdict,
            ascii_piece(tool_call_id),
            rid,
        )
