"""What one run asks of the session (:class:`SessionOptions`): the wrap options that shape
:class:`assay.session.session.WrapSession`, and what `assay mcp serve` adds for a link that
carries the calls of one user's clients (docs/serve.md, "Records", "Approvals")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from assay.policy import Decision
from assay.session.admission import DEFAULT_MAX_FRAME_BYTES
from assay.session.effects import Sink
from assay.session.server_side import SERVER_HOLD_LIMIT

__all__ = ["SessionOptions"]


@dataclass
class SessionOptions:
    """What one run asks for (the wrap options that shape the session)."""

    dry_run: bool = False
    verbose: bool = False
    label: str = "default-mcp-server"
    event_source: str | None = None
    decision_sinks: tuple[Sink, ...] = ()  # sinks that take decision events
    audit: bool = False
    keep_events: bool = False  # keep this run's coverage aggregate (bounded; for --coverage-out)
    receipts: bool = False  # build request receipts
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    shutdown_grace: float = 1.0
    server_hold_limit: int = SERVER_HOLD_LIMIT
    # --declared-manifest: the document assay.manifest.declared.parse_declared returned
    declared_manifest: dict[str, Any] | None = None
    hide_denied_tools: bool = False  # --hide-denied-tools (never in a dry run)
    # the agent session's key in records (docs/wrap.md, "Shared sessions"); None: not shared
    shared_session_key: str | None = None
    # --log-arguments: the cap in bytes of each call's logged arguments; None: not logged
    log_arguments_max: int | None = None
    # one stderr line when the server ends on its own (a stdio server; a remote one says why it
    # was lost itself: docs/remote.md, "When the server fails")
    announce_exit: bool = True
    # the user whose calls these are (`assay mcp serve`; docs/serve.md, "Records"): the records'
    # ``subject``; None in wrap
    subject: str | None = None
    # signed 2026-07-28-era approvals (`assay mcp serve`; docs/serve.md, "Approvals"): the
    # gateway's key; None: wrap's own, kept in this session's memory
    approval_signing_key: bytes | None = None
    # the client capabilities of a request the shell knows is of the 2026-07-28 era though its
    # frame does not say so (serve: a link is a 2025-era session); None: read from the frame
    request_era: Callable[[Mapping[str, Any]], Mapping[str, Any] | None] | None = None
    # an out-of-band approver (`assay mcp serve`'s approvals: docs/serve.md, "Out-of-band
    # approvers"), by name: a call that needs approval is held and asked of it (AskApprover), in
    # both eras, never of the client; its timeout (None: the policy's approval_timeout)
    approver: str | None = None
    approver_timeout: float | None = None
    # given a call's request id, the (name, version) of the client it came from, bounded and
    # printable, or None (`assay mcp serve`, whose link carries several clients' calls:
    # docs/serve.md, "Records"); None in wrap
    client_of: Callable[[Any], tuple[str, str | None] | None] | None = None
    # given a call's request id, the id its client sent it with (`assay mcp serve`, whose link
    # numbers the requests of several clients: docs/serve.md, "Records"); the records carry that
    # one. None (wrap), or an id it does not know: the records carry the frame's
    client_id_of: Callable[[Any], Any] | None = None
    # told every decision as it is recorded (the decision and the client's frame), records on
    # or off: `assay mcp serve`'s metrics and traces (docs/serve.md, "Health and metrics"); None
    # in wrap, and in serve without them
    on_decision: Callable[[Decision, Mapping[str, Any]], None] | None = None
    # told every client line the guard refused unread (answered with a null id: not JSON, too
    # deep, too long, ...), with the line (empty when it was too long to be kept) and the reason:
    # `assay mcp serve`'s link answers the request it wrote that line for, which would otherwise
    # wait for an answer with its id (docs/serve.md, "Upstreams and the agent session of a
    # user"); None in wrap, whose client reads the null-id error itself
    on_unread: Callable[[bytes, str], None] | None = None
