"""Approvals, and what an upstream asks, through a real `assay mcp serve` process (docs/serve.md, "Approvals"), with the
official TypeScript SDK clients: v1 in the 2025 era (asked by an `elicitation/create` request of
the gateway's) and v2 negotiating 2026-07-28 (asked by an `input_required` result, which its
multi-round-trip driver fulfils with the same handler and retries with the signed
`requestState`). The person accepts or declines; the upstream runs only the accepted call."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import trio

from test_gateway_approvals import POLICY
from test_serve_e2e import issuer, serve, token

TS_CLIENT = Path(__file__).resolve().parent.parent / "e2e" / "ts_serve_client.mjs"


async def _ts_client(tmp_path: Path, sdk: str, mode: str | None, extra: str = "", **spec: object) -> list[dict]:
    """One run of tests/e2e/ts_serve_client.mjs as alice against a real serve (the remote
    upstream is never used: links open on first use); its output lines, the first checked."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH (./dev test installs it and the pinned MCP packages)", pytrace=False)
    with issuer() as (iss, key), trio.fail_after(120):
        async with serve(tmp_path, iss, "http://127.0.0.1:9/mcp", policy=POLICY, extra=extra) as (url, _proc):
            alice = token(iss, key, "alice", "http://127.0.0.1/mcp")
            spec = {"sdk": sdk, "mode": mode, "url": url, "token": alice, **spec}
            done = await trio.run_process(
                [node, str(TS_CLIENT)], stdin=json.dumps(spec).encode(), capture_stdout=True, capture_stderr=True
            )
    lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
    era = "2026-07-28" if sdk == "v2" else "2025-11-25"
    assert lines[0] == {"kind": "connected", "protocolVersion": era}, done.stderr
    assert len(lines) > 1, done.stderr
    return lines


@pytest.mark.parametrize(
    ("sdk", "mode", "answer"),
    [("v1", None, "accept"), ("v1", None, "decline"), ("v2", "auto", "accept"), ("v2", "auto", "decline")],
)
async def test_an_approval_through_serve_in_each_era(tmp_path: Path, sdk: str, mode: str | None, answer: str) -> None:
    (tmp_path / "approval.key").write_text("0123456789abcdef0123456789abcdef\n")
    steps = [{"op": "call", "name": "local__send", "arguments": {"text": "hello"}}]
    extra = "approval_key: {file: approval.key}\n"
    lines = await _ts_client(tmp_path, sdk, mode, extra, answer=answer, steps=steps)
    call = lines[1]
    assert call["asked"] == 1, call  # the person was asked once, in either era
    if answer == "accept":
        # the upstream got the call, and nothing of the gateway's approval members
        assert call["is_error"] is False and call["texts"] == ["sent hello"], call
    else:
        assert call["is_error"] is True and call["texts"][0] == "Content blocked by policy", call
        contract = json.loads(call["texts"][1])
        assert contract["error_code"] == "E_APPROVAL_DENIED" and contract["approval"] == "declined"


@pytest.mark.parametrize(("sdk", "mode"), [("v1", None), ("v2", "auto")])
async def test_an_upstream_samples_the_client_in_each_era(tmp_path: Path, sdk: str, mode: str | None) -> None:
    """The upstream's own request during a call: on the call's stream for v1 (2025 era), in rounds
    of input_required and retries for v2 (2026-07-28), fulfilled by the SDK's driver."""
    steps = [{"op": "call", "name": "local__ask"}]
    lines = await _ts_client(tmp_path, sdk, mode, sample="from the model", steps=steps)
    call = lines[1]
    assert call.get("is_error") is False and call["texts"] == ["sampled from the model"], call
    assert call["sampled"] == 1
