"""Helpers for the `assay-mcp-server` tests: a policy root with the upstream-style fixtures and
a helper that runs the real server process over a batch of stdin lines."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import SERVER

FIXTURES = {
    "blocklist_policy.yaml": "blocklist: [dangerous_tool]\n",
    "strict_policy.yaml": (
        "schemas:\n"
        "  strict_tool:\n"
        "    type: object\n"
        "    additionalProperties: false\n"
        "    properties:\n"
        "      code: {type: integer}\n"
    ),
    "policy.yaml": "read_file:\n  type: object\n",  # legacy tool: schema map -> no schemas
    "sequence.yaml": 'version: "1.1"\nsequences:\n  - {type: before, first: Search, then: Create}\n',
    "seq_full.yaml": (
        'version: "1.1"\n'
        "name: demo\n"
        "tools:\n"
        "  allow: [Search, Create, Read]\n"
        "  deny: [rm]\n"
        "aliases:\n"
        "  Lookup: [Search, Read]\n"
        "sequences:\n"
        "  - {type: before, first: Search, then: Create}\n"
        "  - {type: never_after, trigger: Create, forbidden: rm}\n"
        "  - {type: require, tool: Create}\n"
    ),
    "bad_syntax.yaml": "blocklist: [a\nfoo: bar\n",
}


@dataclass
class Session:
    stdout: bytes
    stderr: bytes
    returncode: int

    @property
    def lines(self) -> list[bytes]:
        return self.stdout.splitlines(keepends=True)

    @property
    def responses(self) -> list[dict]:
        return [json.loads(line) for line in self.lines]

    @property
    def events(self) -> list[dict]:
        out = []
        for line in self.stderr.decode("utf-8", "replace").splitlines():
            out.append(json.loads(line))
        return out

    def fields(self, event: str) -> list[dict]:
        return [e["fields"] for e in self.events if e["fields"]["event"] == event]


def run_server(root: Path, stdin: bytes | list, env: dict[str, str], timeout: float = 60) -> Session:
    """Run the installed server over ``stdin`` (bytes, or messages/lines joined with `\\n`)."""
    if isinstance(stdin, list):
        parts = []
        for item in stdin:
            if isinstance(item, (dict, list)):
                item = json.dumps(item, separators=(",", ":"))
            parts.append(item.encode() if isinstance(item, str) else item)
        stdin = b"".join(p + b"\n" for p in parts)
    res = subprocess.run(
        [str(SERVER), "--policy-root", str(root)],
        input=stdin,
        env=env,
        capture_output=True,
        timeout=timeout,
    )
    return Session(res.stdout, res.stderr, res.returncode)


def call(rpc_id, name, arguments=None, **params) -> dict:
    p = {"name": name}
    if arguments is not None:
        p["arguments"] = arguments
    p.update(params)
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": p}


def payload_of(response: dict) -> dict:
    result = response["result"]
    assert len(result["content"]) == 1 and result["content"][0]["type"] == "text"
    return json.loads(result["content"][0]["text"])


__all__ = ["Session", "run_server", "call", "payload_of", "FIXTURES"]
