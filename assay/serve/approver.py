"""The out-of-band approvers of ``assay mcp serve`` (docs/serve.md, "Out-of-band approvers"):
the hooks a link's relay asks about a held call (:data:`assay.shells.stdio.relay.Approver`), built
from the config's ``approvals``.

- :class:`WebhookApprover`: one POST of JSON ``{approval_id, subject, server, tool, arguments,
  expires_at}`` to the configured URL, signed with HMAC-SHA256 over the body when a secret is
  given (``X-Assay-Signature: sha256=<hex>``); a 2xx answer ``{"decision": "allow"}`` approves,
  ``{"decision": "deny"}`` declines, anything else (another status, another body, no answer,
  a connection that fails) denies ``failed``.
- :class:`QueueApprover`: the call is put in the approvals queue of the state directory
  (:mod:`assay.serve.approvals_queue`) and the hook waits for ``assay mcp approvals allow|deny``
  to answer it, looking every :data:`POLL_S`; a call settled otherwise (the deadline, the client's
  cancel, the link's end) is withdrawn from the queue.

Neither blocks the trio thread: the webhook is httpx2 on trio, the queue's SQLite work runs in a
worker thread. The relay cancels a hook at the call's deadline; the session then denies the call
``timed_out``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

import msgspec
import trio

from assay.gateway.config import Approver, ConfigError, ServeConfig
from assay.jsonwrite import dumps_ascii, dumps_utf8
from assay.serve.approvals_queue import ApprovalQueue, QueueError, queue_path
from assay.serve.link import LinkError, read_secret
from assay.session.effects import AskApprover
from assay.shells.stdio.relay import Approver as Hook

__all__ = ["MAX_ANSWER_BYTES", "POLL_S", "QueueApprover", "SIGNATURE_HEADER", "WebhookApprover", "open_approver"]

SIGNATURE_HEADER = "X-Assay-Signature"
MAX_ANSWER_BYTES = 64 * 1024
POLL_S = 0.2  # how often a waiting call looks at the queue
_decode = msgspec.json.Decoder()


def _wall(deadline: float) -> float:
    """The wall-clock time of a trio-clock ``deadline``."""
    return time.time() + (deadline - trio.current_time())


def _json(value: Any) -> bytes:
    """Compact JSON (a lone surrogate in a string: the whole text in ASCII escapes)."""
    try:
        return dumps_utf8(value)
    except UnicodeEncodeError:
        return dumps_ascii(value).encode("ascii")


class WebhookApprover:
    """The approver at ``url`` (docs/serve.md, "Out-of-band approvers")."""

    def __init__(
        self,
        url: str,
        *,
        secret: Callable[[], str] | None,
        environ: Mapping[str, str],
        warn: Callable[[str], None],
    ) -> None:
        self.url = url
        self.secret = secret
        self.environ = dict(environ)
        self.warn = warn
        parts = urlsplit(url)
        self.where = f"{parts.scheme}://{parts.netloc}"  # for messages: never a path or a query

    def body(self, ask: AskApprover) -> bytes:
        expires = datetime.fromtimestamp(_wall(ask.deadline), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return _json(
            {
                "approval_id": ask.approval_id,
                "subject": ask.subject,
                "server": ask.server,
                "tool": ask.tool,
                "arguments": ask.arguments,
                "expires_at": expires,
            }
        )

    async def __call__(self, ask: AskApprover) -> str:
        import httpx2

        from assay._version import __version__
        from assay.shells.upstream_http.client import http_client

        body = self.body(ask)
        headers = {"Content-Type": "application/json", "User-Agent": f"assay/{__version__}"}
        if self.secret is not None:
            try:
                key = self.secret().encode("utf-8")
            except LinkError as exc:
                self.warn(f"[assay] approver webhook: {exc}; the call is denied")
                return "failed"
            headers[SIGNATURE_HEADER] = "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
        left = max(1.0, ask.deadline - trio.current_time())
        client = http_client(self.environ, headers=headers, timeout=httpx2.Timeout(left))
        try:
            async with client.stream("POST", self.url, content=body) as resp:
                if not 200 <= resp.status_code < 300:
                    return self._failed(f"HTTP {resp.status_code}")
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        return self._failed(f"an answer over {MAX_ANSWER_BYTES} bytes")
                    chunks.append(chunk)
        except httpx2.TimeoutException:
            return self._failed("no answer in time")
        except (httpx2.TransportError, httpx2.InvalidURL) as exc:
            return self._failed(f"cannot reach it ({type(exc).__name__})")
        finally:
            with trio.CancelScope(shield=True):
                await client.aclose()
        try:
            answer = _decode.decode(b"".join(chunks))
        except msgspec.DecodeError:
            return self._failed("an answer that is not JSON")
        decision = answer.get("decision") if isinstance(answer, dict) else None
        if decision == "allow":
            return "accept"
        if decision == "deny":
            return "decline"
        return self._failed('an answer without "decision": "allow" or "deny"')

    def _failed(self, why: str) -> str:
        self.warn(f"[assay] approver webhook {self.where}: {why}; the call is denied")
        return "failed"


class QueueApprover:
    """The approvals queue (docs/serve.md, "Out-of-band approvers"), answered by
    ``assay mcp approvals``."""

    def __init__(self, queue: ApprovalQueue, *, warn: Callable[[str], None], poll_s: float = POLL_S) -> None:
        self.queue = queue
        self.warn = warn
        self.poll_s = poll_s

    async def __call__(self, ask: AskApprover) -> str:
        queue = self.queue
        arguments = _json(ask.arguments).decode("utf-8")
        expires = _wall(ask.deadline)
        try:
            approval_id = await queue.run(
                lambda: queue.put(ask.subject, ask.server, ask.tool, arguments, time.time(), expires)
            )
        except QueueError as exc:
            self.warn(f"[assay] {exc}; the call is denied")
            return "failed"
        try:
            while True:
                decision = await queue.run(lambda: queue.decision(approval_id))
                if decision == "allow":
                    return "accept"
                if decision is not None:
                    return "decline"
                await trio.sleep(self.poll_s)
        except QueueError as exc:
            self.warn(f"[assay] {exc}; the call is denied")
            return "failed"
        finally:  # settled otherwise (cancelled): no answer may land on it any more
            with trio.CancelScope(shield=True):
                try:
                    await queue.run(lambda: queue.withdraw(approval_id, time.time()))
                except QueueError:
                    pass


def open_approver(
    config: ServeConfig, environ: Mapping[str, str], warn: Callable[[str], None]
) -> tuple[Hook, Callable[[], None]] | None:
    """The hook of the config's approver and what closes it; None without one. The queue's
    state directory is made (0700) or checked here: one that cannot be used is a
    :class:`ConfigError` (exit 2)."""
    approvals: Approver | None = config.approvals
    if approvals is None:
        return None
    if approvals.kind == "webhook":
        assert approvals.url is not None
        secret = approvals.secret
        read = None if secret is None else (lambda: read_secret(secret, config.base_dir, environ))
        return WebhookApprover(approvals.url, secret=read, environ=environ, warn=warn), lambda: None
    from assay.policy.storeapi import StoreError
    from assay.statedir import ensure_state_dir, state_dir

    directory = state_dir(config.state_dir, environ)
    try:
        ensure_state_dir(directory)
    except StoreError as exc:
        raise ConfigError([f"approvals: {exc.cause}"]) from None
    queue = ApprovalQueue(queue_path(directory))
    return QueueApprover(queue, warn=warn), queue.close


def queue_of(config: ServeConfig, environ: Mapping[str, str] | None = None) -> ApprovalQueue:
    """The queue of the config's state directory as ``assay mcp approvals`` reads it (never
    created)."""
    from assay.statedir import state_dir

    env = os.environ if environ is None else environ
    return ApprovalQueue(queue_path(state_dir(config.state_dir, env)), create=False)
