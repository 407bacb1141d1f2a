"""The rooms of one wrap run, built from its policy and :class:`SessionOptions` (sans-IO):
:func:`assemble` makes the records' ledger, the tool book and the server side, the inspection room
when the policy inspects, the approvals room, the decision pipeline's guards, the shared session
when the run shares state, the call path and the client side, and wires them to each other.
:class:`assay.session.session.WrapSession` routes its events to what :func:`assemble` returns
(:class:`Rooms`) and adds the lifecycle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from assay.policy import Policy, SessionState
from assay.policy.guards import GuardContext, Guards, Surface, build_guards
from assay.policy.pipeline import Pipeline
from assay.policy.shared import SharedSession, part_of, shares_state
from assay.policy.storeapi import SessionKey, Store
from assay.session import records
from assay.session.approvals.room import ApprovalRoom
from assay.session.calls import CallPath
from assay.session.client_side import ClientSide
from assay.session.ledger import Ledger
from assay.session.server_side import ServerSide
from assay.session.sessionoptions import SessionOptions
from assay.session.toolbook import ToolBook
from assay.session.watching import needs_inspector

if TYPE_CHECKING:
    from assay.session.baseline import Baseline

__all__ = ["Rooms", "assemble"]


class Rooms(NamedTuple):
    """What :func:`assemble` built: the rooms the session routes its events to."""

    ledger: Ledger
    server: ServerSide
    room: ApprovalRoom
    guards: Guards
    calls: CallPath
    client: ClientSide
    shared: bool  # the run shares its state with the agent session's other wraps


def _signer(options: SessionOptions, wall_clock: Callable[[], float]) -> Callable[[float], Any] | None:
    """How the approvals room signs 2026-07-28-era approvals (given the timeout), when the
    session is given a key (serve); None: wrap's in-memory approvals."""
    key = options.approval_signing_key
    if key is None:
        return None
    from assay.session.approvals.signed import SignedOffers

    subject = options.shared_session_key or ""
    return lambda ttl: SignedOffers(key, subject, options.label, wall_clock, ttl)


def assemble(
    policy: Policy,
    options: SessionOptions,
    state: SessionState,
    clock: Callable[[], float],
    *,
    new_event_id: Callable[[], str] | None,
    now: Callable[[], str] | None,
    approval_token: str | None,
    approval_key: bytes | None,
    shared: tuple[Store, SessionKey] | None,
    wall_clock: Callable[[], float],
) -> Rooms:
    """The rooms of one run (the arguments are :class:`WrapSession`'s, ``state`` its state)."""
    recorder = records.Recorder(
        source=options.event_source or "",
        label=options.label,
        session=options.shared_session_key,
        dry_run=options.dry_run,
        decision_log=bool(options.decision_sinks),
        audit_log=options.audit,
        keep_events=options.keep_events,
        verbose=options.verbose,
        new_event_id=new_event_id,
        now=now,
        arguments_max=options.log_arguments_max,
        subject=options.subject,
        client_of=options.client_of,
        client_id_of=options.client_id_of,
    )
    ledger = Ledger(recorder, options.decision_sinks, options.receipts, options.on_decision)
    baseline: Baseline | None = None
    if options.declared_manifest is not None:  # assay.manifest is loaded only when asked
        from assay.session.baseline import Baseline

        baseline = Baseline(options.declared_manifest)
    tools = ToolBook(
        policy,
        state,
        options.label,
        verbose=options.verbose,
        hide=options.hide_denied_tools and not options.dry_run,
        baseline=baseline,
        on_seen=ledger.tool_listed if options.decision_sinks else None,
    )
    server = ServerSide(tools, options.server_hold_limit, None)
    # what comes back, and resources and prompts (docs/policy.md, "Inspecting what comes back")
    inspector = None
    taint = None
    if needs_inspector(policy):
        from assay.policy.shared import uses_taint
        from assay.session.inspection import Inspector
        from assay.session.watching import TaintState

        if uses_taint(policy):
            seed = (shared[1].key if shared is not None else "local").encode("utf-8", "surrogatepass")
            taint = TaintState(hashlib.blake2b(seed, digest_size=16, person=b"assay-taint").digest())
        inspector = Inspector(policy, options.label, ledger, server.reply, dry_run=options.dry_run, taint=taint)
        inspector.tools = tools
        tools.inspector = inspector
        server.inspector = inspector
    approver = None
    if options.approver is not None:
        approver = (options.approver, options.label, options.subject, options.approver_timeout)
    room = ApprovalRoom(
        policy,
        dry_run=options.dry_run,
        token=approval_token,
        key=approval_key,
        signed=_signer(options, wall_clock),
        era=options.request_era,
        approver=approver,
    )
    # the decision pipeline's guards after the engine, in the registry's order
    # (assay.policy.guards; docs/policy.md, "Evaluation and reason codes")
    built = build_guards(
        GuardContext(
            policy,
            Surface.WRAP,
            options.label,
            state,
            clock,
            session_key=options.shared_session_key,
            baseline=baseline,
            # the inspection room judges what a call sends out, when it has calls to judge
            # (docs/inspect.md, "Speed")
            outbound=inspector if inspector is not None and inspector.guards_calls else None,
            taint=taint,
            asker=room if room.asks else None,
        )
    )
    # one agent session across the client's wraps (docs/wrap.md, "Shared sessions"): the
    # pipeline decides in the store's transaction, and times are the wall clock's
    sharing: SharedSession | None = None
    if shared is not None and (shares_state(policy) or built.parts):
        store, key = shared
        sharing = SharedSession(store, key, part_of(policy), options.label, state, built.parts, wall_clock)
    pipeline = Pipeline(
        policy,
        state,
        built.checks,
        built.approvals,
        clock=clock if sharing is None else wall_clock,
        shared=sharing,
    )
    calls = CallPath(pipeline, ledger, server, options.label, options.dry_run, clock)
    room.attach(calls)
    calls.attach(room)
    if inspector is not None:
        inspector.pipeline = pipeline
        calls.inspector = inspector
    server.prefix = room.prefix
    client = ClientSide(calls.judge, server.reply, calls.released, ledger, options.max_frame_bytes, options.on_unread)
    if sharing is not None and inspector is not None:
        inspector.merge = calls.merge
    return Rooms(ledger, server, room, built, calls, client, sharing is not None)
