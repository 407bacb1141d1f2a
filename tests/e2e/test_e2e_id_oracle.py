"""The TypeScript SDK v1 as an oracle: every server line its client would take as the answer to a
pending request is relayed by wrap, in every id spelling (docs/wrap.md, "Dropped server
responses"). One node process judges all the lines."""

from __future__ import annotations

import itertools
import json
import subprocess

from _e2e_support import E2E

ID_SPELLINGS = [
    2,
    "2",
    " 2",
    "+2",
    "02",
    "0x2",
    "0X2",
    "0b10",
    "0o2",
    "2.0",
    "2e0",
    ".2e1",
    2.0,
    "\u00a02\ufeff",
    3,
    "3",
    "abc",
    None,
    True,
    "",
    "Infinity",
    "2n",
    "0x",
    "-0x2",
]
KINDS = ["result", "error", "both", "method", "no_jsonrpc"]


def lines() -> list[tuple[bytes, int]]:
    out = []
    for rid, kind, escape, sent in itertools.product(ID_SPELLINGS, KINDS, (False, True), (2, 0)):
        message: dict = {"jsonrpc": "2.0", "id": rid}
        if kind in ("result", "both", "method", "no_jsonrpc"):
            message["result"] = {"content": []}
        if kind in ("error", "both"):
            message["error"] = {"code": -1, "message": "m"}
        if kind == "method":
            message["method"] = "x"
        if kind == "no_jsonrpc":
            del message["jsonrpc"]
        text = json.dumps(message)
        if escape:
            text = text.replace('"id":', '"\\u0069d":').replace('"result":', '"res\\u0075lt":')
        out.append((text.encode(), sent))
    return out


def test_every_answer_the_ts_sdk_v1_accepts_is_relayed(node):
    from assay.policy import load_policy
    from tests.wrap._harness import Harness

    cases = lines()
    stdin = "".join(json.dumps({"line": line.decode(), "sent": sent}) + "\n" for line, sent in cases)
    proc = subprocess.run(
        [node, str(E2E / "ts_v1_id_oracle.mjs")],
        input=stdin.encode(),
        capture_output=True,
        cwd=str(E2E),
        timeout=120,
        check=True,
    )
    verdicts = [json.loads(v) for v in proc.stdout.decode().splitlines()]
    assert len(verdicts) == len(cases)
    assert sum(verdicts) > 20  # the oracle does accept many spellings
    policy = load_policy(b'version: "2.0"\n')
    for (line, sent), ts_answers in zip(cases, verdicts):
        session = Harness(policy)
        frame = {"jsonrpc": "2.0", "id": sent, "method": "ping"}
        session.handle(frame)
        relayed, _ = session.server_line(line)
        if ts_answers:
            assert relayed, line
            assert not session.owes_answers, line  # and the request counts as answered
