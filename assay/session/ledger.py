"""The session's records glue in one small place: decision events, audit lines, receipts and
the frame counts of a session (docs/wrap-records.md). Sans-IO: records come out as
:class:`~assay.session.effects.Record` effects; :mod:`assay.session.records` builds their bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from assay.policy import Decision
from assay.session import records
from assay.session.admission import Rejected, frame_digest
from assay.session.effects import Effect, Record, Sink, Warn
from assay.session.records.clients import ClientNotes

__all__ = ["Ledger"]


class Ledger:
    """What one run writes down: ``record`` for an evaluated call, ``receipt`` for a frame
    (once ``receipting``: request receipts asked for, and the run is a session), and the
    counts of the session's frames."""

    __slots__ = (
        "_recorder",
        "active",
        "_sinks",
        "receipts",
        "receipting",
        "_seq",
        "forwarded",
        "blocked",
        "rejected",
        "dropped",
        "clients",
        "_observe",
    )

    def __init__(
        self,
        recorder: records.Recorder,
        sinks: tuple[Sink, ...],
        receipts: bool,
        observe: Callable[[Decision, Mapping[str, Any]], None] | None = None,
    ) -> None:
        self._recorder = recorder
        # whether an evaluated call goes through :meth:`record`: it writes something, or
        # ``observe`` (serve's metrics) is told each decision
        self.active = recorder.active or observe is not None
        self._observe = observe
        self._sinks = sinks
        self.receipts = receipts
        self.receipting = False  # receipts asked for and the run is a session
        self._seq = 0
        self.forwarded = self.blocked = self.rejected = self.dropped = 0
        # what the client declares (docs/wrap-records.md, "The client"): noted when a log keeps it
        self.clients = ClientNotes() if sinks else None

    def begin(self) -> None:
        """The run became a session: counts cover the session only; receipts start."""
        self.forwarded = self.blocked = self.rejected = self.dropped = 0
        self.receipting = self.receipts

    @property
    def coverage(self) -> records.Coverage | None:
        """This run's coverage aggregate (docs/wrap-records.md, "Session reports"); None unless
        the run keeps one (``--coverage-out``)."""
        return self._recorder.coverage

    @property
    def counts(self) -> dict[str, int]:
        return {
            "forwarded": self.forwarded,
            "blocked": self.blocked,
            "rejected": self.rejected,
            "dropped": self.dropped,
        }

    def record(
        self,
        decision: Decision,
        frame: dict[str, Any],
        params: Any,
        name: str,
        valid: bool,
        binding: str | None,
        out: list[Effect],
    ) -> str | None:
        """Decision event, audit record and --verbose line of one evaluated call; returns the
        event id (receipts name it). ``observe``, when given, is told the decision first."""
        if self._observe is not None:
            self._observe(decision, frame)
        rec = self._recorder.record(decision, frame, params, name, valid, binding)
        line = rec.decision_line
        if line is not None:
            for sink in self._sinks:
                out.append(Record(sink, line))
        if rec.audit_line is not None:
            out.append(Record(Sink.AUDIT_LOG, rec.audit_line))
        if rec.verbose is not None:
            out.append(Warn(rec.verbose))
        return rec.event_id

    def tool_listed(
        self, tool: dict[str, Any], digest: str | None, schema_hash: str, meta_hash: str, out: list[Effect]
    ) -> None:
        """The ``assay.tool.listed`` event of a newly seen tool, to every decision sink
        (docs/wrap-records.md, "Tools seen")."""
        line = self._recorder.tool_listed(tool, digest, schema_hash, meta_hash)
        for sink in self._sinks:
            out.append(Record(sink, line))

    def client(self, facts: dict[str, Any] | None, out: list[Effect]) -> None:
        """The ``assay.client.capabilities`` event of what the client declared (``facts`` from
        :class:`~assay.session.records.clients.ClientNotes`; None: nothing new), to every decision
        sink (as ``assay.tool.listed``: the audit log holds calls only)."""
        if facts is None:
            return
        line = self._recorder.client(**facts)
        for sink in self._sinks:
            out.append(Record(sink, line))

    def inspected(self, out: list[Effect], **fields: Any) -> None:
        """The ``assay.response.inspected`` event of an inspection that found something, to
        every decision sink, or to the audit log when the run keeps no decision log
        (docs/wrap-records.md, "Inspection findings")."""
        sinks = self._sinks or ((Sink.AUDIT_LOG,) if self._recorder.audit_log else ())
        if not sinks:
            return
        line = self._recorder.inspected(**fields)
        for sink in sinks:
            out.append(Record(sink, line))

    def receipt(
        self,
        raw: bytes | None,
        frame: dict[str, Any],
        forwarded: bool,
        event_id: str | None,
        out: list[Effect],
        *,
        disposition: str | None = None,
    ) -> None:
        """One request receipt (docs/wrap-records.md): digests and dispositions, never arguments.
        ``disposition`` overrides forwarded/blocked (``consumed``: wrap's own exchange)."""
        self._seq += 1
        has_method = "method" in frame
        out.append(
            Record(
                Sink.RECEIPTS,
                records.receipt_line(
                    self._seq,
                    "sha256:" + frame_digest(raw or b""),
                    ("request" if "id" in frame else "notification") if has_method else "response",
                    disposition or ("forwarded" if forwarded else "blocked"),
                    method=frame["method"] if has_method else records.ABSENT,
                    request_id=frame["id"] if "id" in frame else records.ABSENT,
                    decision_event_id=event_id,
                ),
            )
        )

    def receipt_rejected(self, item: Rejected, out: list[Effect]) -> None:
        self._seq += 1
        out.append(
            Record(
                Sink.RECEIPTS,
                records.receipt_line(
                    self._seq, "sha256:" + item.frame_digest, "rejected", "rejected", reject_reason=item.reason
                ),
            )
        )
