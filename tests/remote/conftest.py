"""Fixtures of the OAuth tests (docs/auth.md): the test authorization server + protected MCP
server as a real process on 127.0.0.1, and a scripted browser ($BROWSER) that follows the
authorization redirect to assay's loopback callback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ASSAY

HERE = Path(__file__).resolve().parent
BROWSER = f"""#!{sys.executable}
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=60) as answer:
    answer.read()
"""


@dataclass
class AuthServer:
    base: str
    proc: subprocess.Popen[str]

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def post(self, path: str) -> None:
        urllib.request.urlopen(urllib.request.Request(self.base + path, method="POST", data=b""), timeout=30).read()

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.base + "/test/stats", timeout=30) as answer:
            result: dict[str, Any] = json.loads(answer.read())
            return result


def start_server(*args: str) -> AuthServer:
    proc = subprocess.Popen([sys.executable, str(HERE / "authserver.py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # waits for the server's readiness line (EOF if it died)
    assert line.startswith("READY "), line
    return AuthServer(f"http://127.0.0.1:{int(line.split()[1])}", proc)


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    server = start_server()
    try:
        yield server
    finally:
        server.proc.kill()
        server.proc.wait()


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def env(tmp_path: Path, base_env: dict[str, str]) -> dict[str, str]:
    browser = tmp_path / "browser"
    browser.write_text(BROWSER)
    browser.chmod(0o755)
    return {**base_env, "BROWSER": str(browser), "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            "DISPLAY": "", "WAYLAND_DISPLAY": ""}


def assay(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ASSAY), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
