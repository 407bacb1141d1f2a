"""Fixtures for the `assay-mcp-server` tests (docs/server.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server._helpers import FIXTURES, Session, run_server


@pytest.fixture
def policy_root(tmp_path: Path) -> Path:
    root = tmp_path / "policies"
    root.mkdir()
    for name, text in FIXTURES.items():
        (root / name).write_text(text)
    return root


@pytest.fixture
def serve(policy_root, base_env):
    def _serve(stdin, env: dict[str, str] | None = None, root: Path | None = None) -> Session:
        full = dict(base_env)
        full.update(env or {})
        return run_server(root or policy_root, stdin, full)

    return _serve
