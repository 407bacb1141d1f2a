"""assay.proc is one package that is the only place that spawns (docs/architecture.md, "Child
processes"): its public names stay where callers import them from, and no other module of
assay starts a process."""

from __future__ import annotations

import re
from pathlib import Path

import assay
from assay import proc

PUBLIC = [
    "Child",
    "KeptChild",
    "ProgramNotFound",
    "SpawnError",
    "BoundedResult",
    "spawn",
    "spawn_kept",
    "keeper_available",
    "run_bounded",
    "read_capped",
    "DEVNULL",
    "PIPE",
    "INHERIT",
    "ChildHandle",
    "ByteReceiver",
    "ByteSender",
]
SPAWNS = re.compile(
    r"\b(?:Popen|os\.fork|os\.exec\w*|os\.spawn\w*|os\.posix_spawn\w*|open_process|run_process|"
    r"subprocess\.(?:run|call|check_call|check_output))\b"
)


def test_every_public_name_is_exported_from_the_package():
    assert set(PUBLIC) <= set(proc.__all__)
    for name in PUBLIC:
        assert hasattr(proc, name), name
    assert proc.PIPE != proc.DEVNULL and proc.INHERIT is None
    assert issubclass(proc.ProgramNotFound, proc.SpawnError) and issubclass(proc.SpawnError, OSError)


def test_only_assay_proc_starts_processes():
    root = Path(assay.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.parent.name == "proc" and path.parent.parent == root:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if SPAWNS.search(line.split("#", 1)[0]):
                offenders.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert offenders == []


def test_every_module_of_the_package_does_one_job_in_few_lines():
    package = Path(proc.__file__).parent
    sizes = {path.name: len(path.read_text().splitlines()) for path in package.glob("*.py")}
    assert {"spawning.py", "child.py", "bounded.py", "keeper.py", "kept.py", "handle.py"} <= set(sizes)
    assert max(sizes.values()) <= 400, sizes
