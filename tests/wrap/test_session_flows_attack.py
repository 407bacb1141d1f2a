"""A hostile client against wrap's flow rules and per-tool rate limits, in memory
(docs/policy.md, "Flow rules", "Per-tool rate limits"; docs/wrap.md, "Approvals"): frames chosen
to bypass a rule, to make the session judge a call on the wrong state, or to use memory without
bound. No frame may raise out of the session."""

from __future__ import annotations

import gc
import json
import tracemalloc

from assay.policy import load_policy
from assay.wrap.session import SessionOptions

from tests.wrap._harness import Harness

MIB = 1 << 20


def session(policy_text: bytes, **options) -> Harness:
    h = Harness(load_policy(policy_text), SessionOptions(**options))
    h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    return h


def call(h: Harness, name: str, arguments: object = None, rid: object = 1, **extra):
    frame: dict = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}
    if rid is not ...:
        frame["id"] = rid
    frame.update(extra)
    return h.handle(frame)


def test_long_tool_names_do_not_pile_up_in_the_session():
    h = session(
        b'version: "2.0"\ntools: {allow: ["send_*"]}\nenforcement: {unconstrained_tools: allow}\n'
        b'limits: {tools: [{tools: ["send_*"], max_calls: 100000, per: 60s}]}\n'
        b'sequences: [{type: max_calls, tool: "send_*", max: 100000}]\n'
    )
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(24):
            line = json.dumps(
                {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": f"send_{i}_" + "x" * MIB}}
            ).encode()
            assert h.handle(line).disposition == "forwarded"
            del line
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    # the policy's plan cache, the rate and the flow caches each kept every name (24 MiB)
    assert held < 4 * MIB, held
    assert h.session._flows.n == 24
