"""Memory stays bounded whatever the client sends (docs/wrap.md, "Output to the client" and
"One-run outputs and session reports"): an in-memory session with every record and report on
(decision logs, audit, receipts, --verbose, coverage) keeps its peak resident set under 100 MB
over 10^5 ordinary calls, and over 200 calls that each name a different 1 MiB tool.

Each drive runs in a fresh process (tests/wrap/_memory_drive.py) and reports its own VmHWM, so
what other tests left in this one does not count.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
ROOT = Path(__file__).resolve().parents[2]
LIMIT_KIB = 100 * 1024


def _peak_kib(mode: str) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "wrap" / "_memory_drive.py"), mode],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


@pytest.mark.parametrize("mode", ["many", "long"])
def test_peak_memory_is_bounded(mode):
    peak = _peak_kib(mode)
    assert peak < LIMIT_KIB, f"{mode}: peak RSS {peak / 1024:.0f} MB"
