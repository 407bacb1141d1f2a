"""Shared test fixtures. Tests run real processes: the installed console scripts live next to
the interpreter running pytest (the project venv)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests (docs/testing.md, "Property tests"): the same examples on every run by default,
# so a landing never depends on the luck of the draw; ASSAY_HYPOTHESIS=explore draws new ones.
settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile("explore" if os.environ.get("ASSAY_HYPOTHESIS") == "explore" else "repeatable")

BIN = Path(sys.executable).parent
ASSAY = BIN / "assay"
SERVER = BIN / "assay-mcp-server"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def base_env() -> dict[str, str]:
    """The current environment without any ASSAY_* variable that could change behaviour, and
    without what says a browser can be opened (docs/auth.md, "Where a browser can be opened"):
    a wrap a test starts never opens one unless the test gives it $BROWSER. Nor COLUMNS and LINES:
    the width of the terminal running the tests (pytest-xdist workers have COLUMNS=80) must not
    change what a command prints."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith("ASSAY_") and k not in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY", "COLUMNS", "LINES")
    }


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path_factory, monkeypatch):
    """Each test has its own assay state directory (docs/wrap.md, "Shared sessions"): every wrap
    a test starts is a child of the pytest process, so without this the wraps of different
    tests would join one client session in the user's state directory. ``XDG_STATE_HOME`` (not
    an ASSAY_* variable) passes through ``base_env``."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))


@pytest.fixture(scope="session")
def pg_server():
    """A real Postgres on 127.0.0.1 for this test session (tests/pgserver.py), started when a
    test first asks for it and stopped at the end; :meth:`~tests.pgserver.PgServer.database`
    makes each test a database of its own."""
    from tests.pgserver import start_server, stop_server

    try:
        server = start_server()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield server
    stop_server(server)
