"""The TypeScript SDKs as the oracle of what wrap relays (docs/inspect.md, "Malformed answers"):
generated server lines made of the members a client looks at (in any order, repeated, names
escaped, ids of every spelling, errors valid or not, secrets and instructions anywhere) go
through a wrap session that masks and strips while a call's answer is awaited; every line of
its output that the SDK v1 or v2 accepts as a message holds no secret and no instruction. One
node process judges all the lines (the Python SDK's own reader is the oracle of the same
property in tests/wrap/test_session_malformed.py)."""

from __future__ import annotations

import json
import random
import subprocess

from _e2e_support import E2E

from tests.wrap._harness import Harness
from tests.wrap.test_session_inspect import AWS, TOKEN, call, policy
from tests.wrap.test_session_malformed import MASK, PHRASE

TEXTS = ["fine", f"{PHRASE} and mail {TOKEN}", TOKEN, f"a \u200b\u200b{PHRASE}", f"key {AWS}"]
IDS = [2, "2", " 2", "+2", 2.0, "0x2", "2e0", None, 3, "abc", True]


def member(rnd: random.Random, name: str) -> str:
    text = rnd.choice(TEXTS)
    value = {
        "jsonrpc": rnd.choice(["2.0", "2.0", "1.0"]),
        "id": rnd.choice(IDS),
        "method": rnd.choice(["notifications/message", "sampling/createMessage", "notifications/progress", 5, None]),
        "params": {
            "data": text,
            "message": text,
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        },
        "result": rnd.choice([{"content": [{"type": "text", "text": text}]}, {"structuredContent": {"k": text}}, 5]),
        "error": {
            "code": rnd.choice([-32000, "-32000", 1.5]),
            "message": rnd.choice([text, 7]),
            **({"data": {"notes": text}} if rnd.random() < 0.7 else {}),
        },
    }[name]
    spelled = name if rnd.random() < 0.8 else name.replace(name[0], "\\u%04x" % ord(name[0]), 1)
    return f'"{spelled}":{json.dumps(value)}'


def generated(n: int) -> list[bytes]:
    rnd = random.Random(20260728)
    names = ["jsonrpc", "id", "method", "params", "result", "error"]
    out = []
    for _ in range(n):
        picked = (
            ["jsonrpc", "id"] + rnd.sample(names, rnd.randrange(1, 4))
            if rnd.random() < 0.7
            else [rnd.choice(names) for _ in range(rnd.randrange(1, 7))]
        )
        rnd.shuffle(picked)
        out.append(("{" + ",".join(member(rnd, n) for n in picked) + "}").encode())
    return out


def test_what_wrap_relays_the_typescript_sdks_read_without_a_secret_or_an_instruction(node) -> None:
    relayed: list[tuple[bytes, bytes]] = []
    for raw in generated(1500):
        h = Harness(policy(MASK))
        h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
        call(h, 2, "read")
        relayed += [(raw, line) for line in h.server(raw + b"\n").to_client.splitlines()]
    stdin = "".join(json.dumps(line.decode("utf-8", "replace")) + "\n" for _, line in relayed)
    proc = subprocess.run(
        [node, str(E2E / "ts_message_oracle.mjs")],
        input=stdin.encode(),
        capture_output=True,
        cwd=str(E2E),
        timeout=120,
        check=True,
    )
    verdicts = [json.loads(v) for v in proc.stdout.decode().splitlines()]
    assert len(verdicts) == len(relayed)
    accepted = 0
    for (raw, line), verdict in zip(relayed, verdicts, strict=True):
        if not (verdict["v1"] or verdict["v2"]):
            continue
        accepted += 1
        text = json.dumps(json.loads(line), ensure_ascii=False)
        assert TOKEN not in text and AWS not in text and PHRASE not in text, (raw, line)
    assert accepted > 150, accepted  # the clients did read much of it (answers, requests, notifications)
