"""Out-of-band approvers of the gateway (docs/serve.md, "Out-of-band approvers"), with real
parts: a webhook that is a real HTTP server on 127.0.0.1 (answering allow, deny, garbage, an
error status, or never), and the approvals queue answered by the real `assay mcp approvals`
command in another process while a call of a user waits in the gateway; in both eras of the
client's request. Every wait is on an event or on the command's output, never a sleep."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trio

from assay.cli.serve import load_config
from assay.gateway.config import Approver, Secret, ServeConfig
from assay.serve.approvals_queue import ApprovalQueue
from assay.serve.approver import open_approver
from gwsupport import STDIO_SERVER, TIMEOUT, connect, gateway, stdio, text_of, user

from tests.conftest import ASSAY

ALICE = user("alice")
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
POLICY = (
    'version: "2.0"\ntools:\n  allow: ["*"]\n  approval_required: ["send"]\n  approval_timeout: 60s\n'
    "enforcement: { unconstrained_tools: allow }\n"
)
KEY = "webhook-test-key"


def approval(answer: dict[str, Any]) -> str | None:
    """The deny payload's ``approval`` (None: the call was not denied)."""
    result = answer.get("result") or {}
    if result.get("isError") is not True:
        return None
    return json.loads(result["content"][1]["text"]).get("approval")


async def call(client: Any, era: str, text: str) -> dict[str, Any]:
    if era == "2025":
        return await client.call("local__send", {"text": text})
    return await client.request("tools/call", {"name": "local__send", "arguments": {"text": text}, "_meta": MODERN})


async def conversation(gw: Any, era: str) -> Any:
    # the 2025 client could elicit: the approver is asked all the same, never the client
    if era == "2025":
        client, _ = await connect(gw, ALICE, caps={"elicitation": {}})
    else:
        client, _ = await connect(gw, ALICE, version="2026-07-28")
    return client


# -- the webhook ---------------------------------------------------------------------------------


class Hook:
    """A webhook on 127.0.0.1 (stdlib, in a thread): ``/allow``, ``/deny``, ``/garbage``,
    ``/500``; ``/never`` holds the request until the test ends."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.release = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.requests.append((self.path, dict(self.headers), body))
                if self.path == "/never":
                    hook.release.wait(TIMEOUT)
                    return
                status, answer = {
                    "/allow": (200, b'{"decision": "allow"}'),
                    "/deny": (200, b'{"decision": "deny"}'),
                    "/garbage": (200, b'{"decision": "sure'),
                    "/500": (500, b'{"decision": "allow"}'),
                }[self.path]
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook():
    server = Hook()
    yield server
    server.close()


def webhook_config(tmp: Path, url: str, timeout: float | None = None) -> ServeConfig:
    approvals = Approver("webhook", url=url, secret=Secret(env="APPROVER_KEY"), timeout_s=timeout)
    return ServeConfig(base_dir=str(tmp), policy="policy.yaml", upstreams=(stdio("local"),), approvals=approvals)


@pytest.mark.parametrize("era", ["2025", "2026"])
@pytest.mark.parametrize(
    ("path", "expected"), [("/allow", None), ("/deny", "declined"), ("/garbage", "failed"), ("/500", "failed")]
)
async def test_the_webhooks_answer_decides(tmp_path: Path, hook: Hook, era: str, path: str, expected: str | None):
    config = webhook_config(tmp_path, hook.url + path)
    warnings: list[str] = []
    made = open_approver(config, {**os.environ, "APPROVER_KEY": KEY}, warnings.append)
    assert made is not None
    async with gateway(tmp_path, [], policy=POLICY, config=config, approver=made[0]) as (gw, _):
        client = await conversation(gw, era)
        answer = await call(client, era, "hi")
        assert approval(answer) == expected
        if expected is None:
            assert text_of(answer) == "sent hi"  # the upstream ran it
        assert not [m for m in client.related if m.get("method") == "elicitation/create"]
    ((got_path, headers, body),) = hook.requests
    assert got_path == path
    sent = json.loads(body)
    assert list(sent) == ["approval_id", "subject", "server", "tool", "arguments", "expires_at"]
    assert (sent["subject"], sent["server"], sent["tool"], sent["arguments"]) == (
        "alice",
        "local",
        "send",
        {"text": "hi"},
    )
    assert sent["approval_id"].startswith("assay-approval-") and sent["expires_at"].endswith("Z")
    signature = "sha256=" + hmac.new(KEY.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Assay-Signature"] == signature
    assert bool(warnings) is (expected == "failed")


async def test_a_webhook_that_never_answers_is_a_deny_at_the_timeout(tmp_path: Path, hook: Hook):
    config = webhook_config(tmp_path, hook.url + "/never", timeout=1.0)
    made = open_approver(config, {**os.environ, "APPROVER_KEY": KEY}, lambda line: None)
    assert made is not None
    async with gateway(tmp_path, [], policy=POLICY, config=config, approver=made[0]) as (gw, _):
        client = await conversation(gw, "2025")
        start = trio.current_time()
        answer = await call(client, "2025", "late")
        assert approval(answer) == "timed_out"
        assert 1.0 <= trio.current_time() - start < TIMEOUT
        assert "within 1s" in text_of(answer)
    assert len(hook.requests) == 1


async def test_without_a_hook_the_configured_approver_denies(tmp_path: Path):
    config = webhook_config(tmp_path, "https://approver.invalid/x")
    async with gateway(tmp_path, [], policy=POLICY, config=config, approver=None) as (gw, _):
        client = await conversation(gw, "2025")
        assert approval(await call(client, "2025", "x")) == "failed"


# -- the queue and `assay mcp approvals` ----------------------------------------------------------


def queue_config(tmp: Path, extra: str = "") -> str:
    (tmp / "policy.yaml").write_text(POLICY)
    cfg = tmp / "serve.yaml"
    cfg.write_text(
        "policy: policy.yaml\nidentity: {none: true}\n"
        f"state_dir: {json.dumps(str(tmp / 'state'))}\n"
        f"approvals: {{approver: queue{extra}}}\n"
        f"upstreams:\n  local: {{command: [{json.dumps(sys.executable)}, {json.dumps(str(STDIO_SERVER))}]}}\n"
    )
    return str(cfg)


async def approvals(*args: str) -> tuple[int, str, str]:
    done = await trio.run_process(
        [str(ASSAY), "mcp", "approvals", *args], capture_stdout=True, capture_stderr=True, check=False
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def pending(cfg: str) -> dict[str, Any]:
    """The one call waiting in the queue, once `approvals list` shows it."""
    with trio.fail_after(TIMEOUT):
        while True:  # each round is a process of the command: it paces the look
            code, out, err = await approvals("list", "--config", cfg, "--json")
            assert code == 0, err
            rows = [json.loads(line) for line in out.splitlines()]
            if rows:
                (row,) = rows
                return row


@pytest.mark.parametrize("era", ["2025", "2026"])
@pytest.mark.parametrize("word", ["allow", "deny"])
async def test_the_queue_answered_by_the_command(tmp_path: Path, era: str, word: str):
    cfg = queue_config(tmp_path)
    config = load_config(cfg)
    warnings: list[str] = []
    made = open_approver(config, os.environ, warnings.append)
    assert made is not None
    got: dict[str, Any] = {}
    try:
        async with gateway(tmp_path, [], policy=POLICY, config=config, approver=made[0]) as (gw, _):
            client = await conversation(gw, era)

            async def ask() -> None:
                got["answer"] = await call(client, era, "queued")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask)
                row = await pending(cfg)
                assert (row["subject"], row["server"], row["tool"], row["arguments"]) == (
                    "alice",
                    "local",
                    "send",
                    {"text": "queued"},
                )
                code, table, _ = await approvals("list", "--config", cfg)
                assert code == 0 and row["id"] in table and "send" in table and '{"text":"queued"}' in table
                assert await approvals(word, row["id"], "--config", cfg) == (
                    0,
                    f"{'allowed' if word == 'allow' else 'denied'} {row['id']}\n",
                    "",
                )
            answer = got["answer"]
            if word == "allow":
                assert approval(answer) is None and text_of(answer) == "sent queued"
            else:
                assert approval(answer) == "declined"
            # the first answer won: a second is refused, whatever it says
            code, _out, err = await approvals("allow", row["id"], "--config", cfg)
            assert code == 1 and "answered already" in err
            assert (await approvals("list", "--config", cfg, "--json"))[1] == ""
        assert warnings == []
    finally:
        made[1]()


async def test_the_command_refuses_what_it_cannot_answer(tmp_path: Path):
    cfg = queue_config(tmp_path)
    code, _out, err = await approvals("allow", "0123456789", "--config", cfg)  # no queue yet: nothing created
    assert code == 1 and "no such approval" in err and not (tmp_path / "state").exists()
    assert (await approvals("list", "--config", cfg))[0] == 0
    (tmp_path / "webhook.yaml").write_text(
        "policy: policy.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n"
    )
    code, _out, err = await approvals("list", "--config", str(tmp_path / "webhook.yaml"))
    assert code == 2 and "approvals.approver is not queue" in err
    (tmp_path / "bad.yaml").write_text("policy: p\n")
    code, _out, err = await approvals("deny", "x", "--config", str(tmp_path / "bad.yaml"))
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err


def test_the_queue_first_answer_wins_and_rows_expire(tmp_path: Path):
    queue = ApprovalQueue(str(tmp_path / "approvals.db"))
    a = queue.put("alice", "local", "send", "{}", now=100.0, expires=130.0)
    b = queue.put(None, "local", "send", "[1]", now=101.0, expires=110.0)
    assert [p.id for p in queue.pending(105.0)] == [a, b]
    assert [p.id for p in queue.pending(110.0)] == [a]  # b expired with its deadline
    assert queue.answer(b, "allow", "t", 110.0) == "expired"
    assert queue.answer(a, "deny", "t", 106.0) == "ok"
    assert queue.answer(a, "allow", "t", 107.0) == "answered"
    assert queue.decision(a) == "deny"
    c = queue.put("bob", "local", "send", "{}", now=120.0, expires=200.0)
    assert queue.decision(b) is None  # forgotten: expired before this put
    assert queue.answer(b, "allow", "t", 120.0) == "unknown"
    queue.withdraw(c, 121.0)
    assert queue.answer(c, "allow", "t", 122.0) == "expired" and queue.pending(122.0) == []
    queue.close()
