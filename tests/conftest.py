"""Shared test fixtures. Tests run real processes: the installed console scripts live next to
the interpreter running pytest (the project venv)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
ASSAY = BIN / "assay"
SERVER = BIN / "assay-mcp-server"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def base_env() -> dict[str, str]:
    """The current environment without any ASSAY_* variable that could change behaviour."""
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("ASSAY_")}
