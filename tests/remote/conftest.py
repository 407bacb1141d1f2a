"""Fixtures of the OAuth tests (docs/auth.md): the test authorization server + protected MCP
server as a real process on 127.0.0.1, and a scripted browser ($BROWSER) that follows the
authorization redirect to assay's loopback callback."""

from __future__ import annotations

import contextlib
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
INIT_HEADERS = {"Accept": "application/json, text/event-stream"}
BROWSER = f"""#!{sys.executable}
import sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({{}}))  # the person's browser, not assay
with opener.open(sys.argv[1], timeout=60) as answer:
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

    def requests(self) -> list[list[str]]:
        """Every request the server got (method, path), its /test/ controls left out."""
        return [list(r) for r in self.stats()["requests"]]

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.base + path, timeout=30) as answer:
            return str(answer.read().decode())

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def start_server(*args: str) -> AuthServer:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "authserver.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # waits for the server's readiness line (EOF if it died)
    assert line.startswith("READY "), line
    return AuthServer(f"http://127.0.0.1:{int(line.split()[1])}", proc)


@contextlib.contextmanager
def running(*args: str) -> Iterator[AuthServer]:
    server = start_server(*args)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    with running() as server:
        yield server


def write_key(path: Path, kind: str) -> Path:
    """A private key of ``kind`` (rsa, p256, p384, ed25519) in ``path`` (PKCS#8 PEM) and its public
    key next to it (``path`` with ``.pub``); returns the public key's path."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    key: Any
    if kind == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif kind == "p256":
        key = ec.generate_private_key(ec.SECP256R1())
    elif kind == "p384":
        key = ec.generate_private_key(ec.SECP384R1())
    else:
        key = ed25519.Ed25519PrivateKey.generate()
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)
    public = path.with_suffix(".pub")
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return public


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def env(tmp_path: Path, base_env: dict[str, str]) -> dict[str, str]:
    browser = tmp_path / "browser"
    browser.write_text(BROWSER)
    browser.chmod(0o755)
    return {
        **base_env,
        "BROWSER": str(browser),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "DISPLAY": "",
        "WAYLAND_DISPLAY": "",
    }


def wrap_auth(url: str, state: Path, environ: dict[str, str] | None = None, **options: Any) -> Any:
    """The auth wrap gives its HTTP client for ``url`` (docs/auth.md, "What wrap does with a login")."""
    from assay.auth.authorizer import Authorizer
    from assay.auth.wrapauth import WrapAuth

    return WrapAuth(Authorizer(url, str(state), environ or {}, **options))


async def login(url: str, state: Path, env: dict[str, str], *args: str) -> str:
    """`assay mcp auth login URL --state-dir STATE ARGS...` in this process (the options as on
    the command line; the browser is $BROWSER of ``env``): the line it prints. Raises LoginError."""
    import io

    from assay.auth.login import LoginOptions
    from assay.auth.login import login as run

    fields: dict[str, Any] = {}
    words = list(args)
    while words:
        flag = words.pop(0)
        name = flag.lstrip("-").replace("-", "_")
        fields[name] = True if name == "no_browser" else words.pop(0)
    return await run(LoginOptions(url=url, **fields), state=str(state), environ=env, err=io.StringIO())


def assay(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ASSAY), *args], env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
