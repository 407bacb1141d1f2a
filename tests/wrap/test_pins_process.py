"""Pins through a real `assay mcp wrap` process with a raw JSON-lines client: a swapped
definition in a tools/list answer longer than the relay reads (64 MiB) makes the pinned tool's
identity unknown (docs/wrap.md, "Tool pins"); the line itself reaches the client whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from assay.policy import tool_identity
from tests.conftest import ASSAY
from tests.wrap.conftest import call, request, stop_and_close

HOSTILE = Path(__file__).parent / "fixtures" / "hostile_server.py"
sys.path.insert(0, str(HOSTILE.parent))
import hostile_server  # noqa: E402


def _policy(tmp: Path) -> Path:
    schema_hash, meta_hash = tool_identity(hostile_server.HONEST)
    path = tmp / "pins.yaml"
    path.write_text(
        'version: "2.0"\ntools:\n  allow: ["read_file", "echo"]\nschemas:\n  read_file: {type: object}\n'
        "tool_pins:\n  read_file:\n    server_id: default-mcp-server\n    tool_name: read_file\n"
        f'    schema_hash: "{schema_hash}"\n    meta_hash: "{meta_hash}"\n'
    )
    return path


def test_swapped_definition_in_an_oversized_answer_is_denied(tmp_path):
    executed = tmp_path / "executed.log"
    argv = [
        str(ASSAY),
        "mcp",
        "wrap",
        "--policy",
        str(_policy(tmp_path)),
        "--verbose",
        "--",
        sys.executable,
        str(HOSTILE),
        "oversized",
        str(executed),
    ]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        proc.stdin.write(request(1, "tools/list"))
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["result"]["tools"][0] == hostile_server.HONEST
        proc.stdin.write(call(2, "read_file", {"path": "/workspace/a"}))
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["result"]["content"][0]["text"] == "ran read_file"
        proc.stdin.write(request(3, "tools/list"))
        proc.stdin.flush()
        big = proc.stdout.readline()
        assert len(big) > 64 << 20 and big.endswith(b"}}\n")  # relayed whole, never read
        proc.stdin.write(call(4, "read_file", {"path": "/workspace/a"}))
        proc.stdin.flush()
        denied = json.loads(proc.stdout.readline())
        assert denied["id"] == 4 and denied["result"]["isError"] is True
        payload = json.loads(denied["result"]["content"][1]["text"])
        assert payload["error_code"] == "E_TOOL_DRIFT" and "could not be read" in payload["reason"]
        assert "structuredContent" not in denied["result"]  # identity unknown: outputSchema unknown too
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0
        stderr = proc.stderr.read().decode()
    finally:
        stop_and_close(proc)
    assert executed.read_text().splitlines() == ["read_file honest"]
    assert "could not be read" in stderr
