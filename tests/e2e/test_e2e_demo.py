"""`./dev demo` runs examples/demo.py: each of its parts shows allowed and denied calls through
`assay mcp wrap` (the README's main job must not break unnoticed), and the demo prints its own
table only: wrap's stderr is kept out of the terminal unless the demo fails."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from _e2e_support import REPO, RUN_TIMEOUT


def run_demo(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "examples" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=env,
    )


def test_the_demo_shows_allows_and_denies_of_every_part() -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ASSAY_")}
    done = run_demo(env)
    assert done.returncode == 0, done.stderr[-2000:]
    # the demo's own table only: no line of wrap's stderr (`[assay] ...`, hashes) anywhere
    assert done.stderr == ""
    assert "[assay]" not in done.stdout and not re.search(r"[0-9a-f]{64}", done.stdout)
    out = done.stdout.splitlines()
    calls = [line.strip() for line in out if line.strip().startswith(("ALLOWED", "DENIED"))]
    # part 1: one call per tool and path, as examples/assay.yaml decides them
    assert calls[0].startswith('ALLOWED  demo: read_file({"path": "/workspace/README.md"})')
    assert calls[3].startswith('DENIED   demo: read_file({"path": "/workspace/../etc/passwd"})')
    assert '"error_code":"E_PATH_CONFINEMENT"' in calls[3]
    # part 2: the same call, denied or allowed by the calls before it (examples/flows.yaml),
    # on two servers of one agent session: the secret read through vault forbids ops' sends
    part2 = calls[6:13]
    assert [c.split("(")[0].split() for c in part2] == [
        ["DENIED", "ops:", "deploy"],
        ["ALLOWED", "ops:", "run_tests"],
        ["ALLOWED", "ops:", "deploy"],
        ["ALLOWED", "ops:", "send_email"],
        ["ALLOWED", "vault:", "read_secret"],
        ["DENIED", "ops:", "send_email"],
        ["DENIED", "ops:", "http_post"],
    ]
    assert '"rule":"tests-before-deploy"' in part2[0] and '"rule":"no-exfiltration"' in part2[5]
    start = next(i for i, line in enumerate(out) if "examples/approvals.yaml" in line)

    def log(lines: list[str]) -> list[list[str]]:
        return [line.split() for line in lines if line.startswith("  deny ") or line.startswith("  allow ")]

    assert ["deny", "ops", "send_email", "P_SEQUENCE_VIOLATION", "no-exfiltration"] == log(out[:start])[-2][:5]
    assert ["allow", "vault", "read_secret"] == log(out[:start])[-3][:3]
    # part 3: the person approves the first deploy and declines the second (examples/approvals.yaml)
    part3 = [line.strip() for line in out[start:] if line.strip().startswith(("ALLOWED", "DENIED", "ASKED"))]
    assert [c.split("(")[0].split()[:3] if not c.startswith("ASKED") else ["ASKED"] for c in part3] == [
        ["ALLOWED", "ops:", "run_tests"],
        ["ASKED"],
        ["ALLOWED", "ops:", "deploy"],
        ["ASKED"],
        ["DENIED", "ops:", "deploy"],
    ]
    assert 'approve the tool call "deploy"' in part3[1] and '{"target":"staging"}' in part3[1]
    assert '"error_code":"E_APPROVAL_DENIED"' in part3[4] and '"approval":"declined"' in part3[4]
    assert ["deny", "ops", "deploy", "P_APPROVAL_DENIED", "tools.approval_required", "approval", "declined"] == log(
        out[start:]
    )[-1]


def test_a_failing_demo_shows_what_wrap_wrote(tmp_path: Path) -> None:
    """An `assay` that fails at once: the demo ends non-zero and prints that `assay`'s stderr."""
    fake = tmp_path / "bin" / "assay"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "assay: error: broken on purpose" >&2\nexit 2\n')
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ASSAY_")}
    env["PATH"] = f"{fake.parent}{os.pathsep}{env.get('PATH', '')}"
    done = run_demo(env)
    assert done.returncode != 0
    assert "demo failed; what assay mcp wrap wrote on stderr:\nassay: error: broken on purpose\n" in done.stderr
