"""Fixtures of the end-to-end tests (helpers live in _e2e_support.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from _e2e_support import E2E, NODE_MODULES


def _pinned_versions() -> dict[str, str]:
    """The exact versions package.json pins (the lockfile holds the same)."""
    return json.loads((E2E / "package.json").read_text())["dependencies"]


@pytest.fixture(scope="session")
def node() -> str:
    """The `node` binary, with the pinned MCP packages installed; FAIL (never skip) without them.

    CI installs Node.js and `./dev test` runs `npm ci` from the committed lockfile, so a missing
    piece is a broken set-up that must be visible, not a silently skipped test.
    """
    node = shutil.which("node")
    if node is None:
        pytest.fail(
            "e2e: `node` (Node.js >= 20) is not on PATH. Install Node.js and npm, then run "
            "`./dev test` (it runs `npm ci` in tests/e2e from package-lock.json).",
            pytrace=False,
        )
    wrong = []
    for name, version in _pinned_versions().items():
        manifest = NODE_MODULES / name / "package.json"
        found = json.loads(manifest.read_text()).get("version") if manifest.is_file() else None
        if found != version:
            wrong.append(f"{name} (want {version}, found {found or 'nothing'})")
    if wrong:
        pytest.fail(
            "e2e: tests/e2e/node_modules does not hold the pinned packages: "
            + ", ".join(wrong)
            + ". Run `./dev test` (or `npm ci` in tests/e2e).",
            pytrace=False,
        )
    return node
