"""The Node side of the URL differential tests (tests/policy/test_fileuri_differential.py,
tests/policy/test_resource_readings.py): tests/policy/url_oracle.mjs as one long-lived child per
test module, one JSON line in and one out per URI, so thousands of generated URIs cost one
Node start."""

from __future__ import annotations

import json
import select
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ORACLE = Path(__file__).resolve().parent / "url_oracle.mjs"
ANSWER_TIMEOUT = 30.0


class NodeReader:
    """The long-lived Node child: one URI per line in, its reading out."""

    def __init__(self, node: str) -> None:
        self.proc = subprocess.Popen(
            [node, str(ORACLE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout

    def read(self, uri: str) -> dict:
        self.stdin.write(json.dumps(uri).encode("ascii") + b"\n")
        self.stdin.flush()
        ready, _, _ = select.select([self.stdout], [], [], ANSWER_TIMEOUT)
        line = self.stdout.readline() if ready else b""
        if not line:
            self.close()
            pytest.fail(f"url_oracle.mjs gave no answer for {uri!r}: {self.proc.stderr.read().decode()!r}")  # type: ignore[union-attr]
        return json.loads(line)

    def close(self) -> None:
        self.stdin.close()
        try:
            self.proc.wait(timeout=ANSWER_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        self.stdout.close()


@pytest.fixture(scope="module")
def node_reader() -> Iterator[NodeReader]:
    """Node, started once for the module; FAIL (never skip) without it, as tests/e2e does."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("`node` (Node.js >= 20) is not on PATH: install Node.js and run `./dev test`", pytrace=False)
    reader = NodeReader(node)
    yield reader
    reader.close()
    assert reader.proc.returncode == 0
