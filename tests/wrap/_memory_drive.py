"""Drive one in-memory WrapSession with every record and report on, then print the process's
peak resident set in KiB (run as a script in a fresh process by tests/wrap/test_memory.py).

The peak is ``VmHWM`` of /proc/self/status, the high-water mark of this process's own memory
since its exec; ``ru_maxrss`` would not do: Linux carries into it the resident set the parent
had when it forked this process (a test run of hundreds of MB).

    python tests/wrap/_memory_drive.py many|long

``many``: 10^5 ordinary ``tools/call`` frames; ``long``: 200 calls, each with its own 1 MiB
tool name. Bytes go in through ``receive_client_data`` (long lines are admitted in place, as the
relay does in a worker thread), each call is answered by the server, effects are dropped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from assay.policy import load_policy
from assay.session.admission import admit
from assay.session.effects import AdmitLine, Sink
from assay.session.session import SessionOptions, WrapSession

POLICY = load_policy(
    b'version: "2.0"\ntools:\n  deny: ["exec"]\n'
    b"schemas:\n  search:\n    type: object\n    properties:\n      q: {type: string}\n"
)


def _run(session: WrapSession, effects: list) -> None:
    todo = list(effects)
    while todo:
        effect = todo.pop()
        if isinstance(effect, AdmitLine):
            todo.extend(session.admitted(admit(effect.line)))


def _call(rid: int, name: str) -> bytes:
    params = {"name": name, "arguments": {"q": "x"}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode() + b"\n"


def _answers(first: int, last: int) -> bytes:
    return b"".join(b'{"jsonrpc":"2.0","id":%d,"result":{"content":[]}}\n' % i for i in range(first, last))


def main(mode: str) -> None:
    options = SessionOptions(
        verbose=True,
        event_source="assay://org/app",
        decision_sinks=(Sink.DECISION_LOG, Sink.DECISION_LOG_NEW),
        audit=True,
        keep_events=True,
        receipts=True,
    )
    session = WrapSession(POLICY, options)
    _run(session, session.receive_client_data(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n'))
    _run(session, session.receive_server_data(_answers(0, 1)))
    if mode == "many":
        names = ("search", "exec", "read_file", "other")
        batch = 1000
        for start in range(1, 100_001, batch):
            data = b"".join(_call(i, names[i % 4]) for i in range(start, start + batch))
            _run(session, session.receive_client_data(data))
            _run(session, session.receive_server_data(_answers(start, start + batch)))
    else:
        for i in range(1, 201):
            name = f"{i:04d}" + "t" * (1024 * 1024)
            _run(session, session.receive_client_data(_call(i, name)))
            _run(session, session.receive_server_data(_answers(i, i + 1)))
    assert session.counts["forwarded"] + session.counts["blocked"] >= (100_000 if mode == "many" else 200)
    status = Path("/proc/self/status").read_text()
    print(next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")))


if __name__ == "__main__":
    main(sys.argv[1])
