"""End to end: what one server returned decides what another may be sent, for the servers of
one client (docs/policy.md, "Flow rules" on response selectors and "Inspecting what comes back"
on `arguments.tainted`; docs/wrap.md, "Shared sessions"). Two wraps around
tests/e2e/leaky_server.py, labelled `a` and `b`, started by one client process: the `mcp` Python
SDK (two `stdio_client` sessions in the test process) and the TypeScript SDK v1 host
(tests/e2e/ts_v1_multi_client.mjs)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import trio

import leaky_server as leaky
from _e2e_support import DENY_TEXT, RUN_TIMEOUT, assert_denied
from _inspect_support import (
    BASE,
    Leaky,
    SECRETS,
    assert_no_secret_in,
    events_by_tool,
    leaky_server,
    python_sessions,
    text_of,
    ts_multi,
)


# --- a response selector in a flow rule, across two servers of one client -----------------

RESPONSE_TRIGGER = (
    BASE
    + """\
sequences:
  - type: never_after
    id: no-fetch-after-a-secret
    trigger: { tool: "*", response: secrets }
    forbidden: fetch
"""
)

URLS = ["http://127.0.0.1:9/before", "http://127.0.0.1:9/after-a-doc", "http://127.0.0.1:9/after-a-secret"]


def two_servers(tmp_path: Path, base_env: dict[str, str], policy: str) -> tuple[Leaky, Leaky]:
    return leaky_server(tmp_path, base_env, policy, label="a"), leaky_server(tmp_path, base_env, policy, label="b")


def assert_response_trigger(a: Leaky, b: Leaky, secret_text: str, denied: tuple[bool, object, str]) -> None:
    assert secret_text == leaky.secret_text()  # no inspect: relayed as it came
    is_error, structured, text = denied
    assert_denied("fetch", is_error, structured, text, "E_SEQUENCE_VIOLATION")
    assert json.loads(text[len(DENY_TEXT) :])["rule"] == "no-fetch-after-a-secret"
    assert [c["url"] for c in b.calls()] == URLS[:2]  # server b never ran the third fetch
    event = events_by_tool(a)["read_secret"]
    assert {f["check"] for f in event["findings"]} == {"secrets"}, event
    assert event["server"] == "a"
    assert "read_doc" not in events_by_tool(a)  # the rule names secrets: an injection is not looked for
    session = a.run.decisions()[-1]["session"]
    assert session.startswith("client:") and b.run.decisions()[-1]["session"] == session
    assert_no_secret_in(a.logs_text())


async def test_response_trigger_python_sdk_two_servers(tmp_path, base_env):
    a, b = two_servers(tmp_path, base_env, RESPONSE_TRIGGER)
    with trio.fail_after(RUN_TIMEOUT):
        async with python_sessions(a, b) as (sa, sb):
            assert (await sb.call_tool("fetch", {"url": URLS[0]})).is_error is False
            assert (await sa.call_tool("read_doc", {})).is_error is False
            assert (await sb.call_tool("fetch", {"url": URLS[1]})).is_error is False
            secret = await sa.call_tool("read_secret", {})
            r = await sb.call_tool("fetch", {"url": URLS[2]})
    assert_response_trigger(a, b, text_of(secret), (r.is_error, r.structured_content, text_of(r)))
    await a.ended()
    await b.ended()


async def test_response_trigger_ts_v1_host_two_servers(node, tmp_path, base_env):
    a, b = two_servers(tmp_path, base_env, RESPONSE_TRIGGER)
    steps = [
        {"server": "b", "name": "fetch", "arguments": {"url": URLS[0]}},
        {"server": "a", "name": "read_doc", "arguments": {}},
        {"server": "b", "name": "fetch", "arguments": {"url": URLS[1]}},
        {"server": "a", "name": "read_secret", "arguments": {}},
        {"server": "b", "name": "fetch", "arguments": {"url": URLS[2]}},
    ]
    lines = await ts_multi(node, {"a": a, "b": b}, steps, base_env, tmp_path)
    assert [x["is_error"] for x in lines[:3]] == [False, False, False], lines
    last = lines[4]
    assert_response_trigger(
        a, b, "".join(lines[3]["texts"]), (last["is_error"], last["structuredContent"], "".join(last["texts"]))
    )
    await a.ended()
    await b.ended()


# --- value taint across two servers -------------------------------------------------------

VALUE_TAINT = (
    BASE
    + """\
inspect:
  secrets: flag
  arguments: { tainted: deny }
  tools:
    - { tool: read_doc, taint: true }
"""
)

TOKEN = SECRETS["github_token"]
DOC_RUN = leaky.INNOCENT_PARTS[0]  # 30 bytes of read_doc's answer
# (data sent through b's `send`, the source whose taint denies it or None)
SENDS: list[tuple[str, str | None]] = [
    (TOKEN, None),  # before anything came back: not tainted yet
    ("read_secret", "step"),
    (TOKEN, "a/read_secret"),
    (f"k={base64.b64encode(SECRETS['aws_access_key_id'].encode()).decode()}", "a/read_secret"),
    (SECRETS["stripe_key"].encode().hex(), "a/read_secret"),
    (f"https://127.0.0.1:9/?k={quote(SECRETS['private_key'])}", "a/read_secret"),  # URL-encoded
    ("hello, an unrelated message", None),
    ("read_doc", "step"),
    (f"quote: {DOC_RUN}", "a/read_doc"),
    ("still unrelated", None),
]


def assert_value_taint(a: Leaky, b: Leaky, results: list[tuple[bool, object, str]]) -> None:
    sends = [(data, source) for data, source in SENDS if source != "step"]
    assert len(results) == len(sends)
    for (data, source), (is_error, structured, text) in zip(sends, results, strict=True):
        if source is None:
            assert (is_error, text) == (False, "ok"), (data, text)
            continue
        assert_denied("send", is_error, structured, text, "E_TAINTED_ARGUMENT")
        reason = json.loads(text[len(DENY_TEXT) :])["reason"]
        assert source in reason, (data, reason)
    assert [c["data"] for c in b.calls()] == [d for d, s in sends if s is None]
    assert_no_secret_in(
        a.logs_text() + "".join(p.read_text() for p in (b.run.decision_log, b.run.audit_log) if p.exists())
    )


async def test_value_taint_python_sdk_two_servers(tmp_path, base_env):
    a, b = two_servers(tmp_path, base_env, VALUE_TAINT)
    results = []
    with trio.fail_after(RUN_TIMEOUT):
        async with python_sessions(a, b) as (sa, sb):
            for data, source in SENDS:
                if source == "step":
                    assert (await sa.call_tool(data, {})).is_error is False
                    continue
                r = await sb.call_tool("send", {"data": data})
                results.append((r.is_error, r.structured_content, text_of(r)))
    assert_value_taint(a, b, results)
    await a.ended()
    await b.ended()


async def test_value_taint_ts_v1_host_two_servers(node, tmp_path, base_env):
    a, b = two_servers(tmp_path, base_env, VALUE_TAINT)
    steps = [
        {"server": "a", "name": data, "arguments": {}}
        if source == "step"
        else {"server": "b", "name": "send", "arguments": {"data": data}}
        for data, source in SENDS
    ]
    lines = await ts_multi(node, {"a": a, "b": b}, steps, base_env, tmp_path)
    results = [(x["is_error"], x["structuredContent"], "".join(x["texts"])) for x in lines if x["server"] == "b"]
    assert_value_taint(a, b, results)
    await a.ended()
    await b.ended()
