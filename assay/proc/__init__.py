"""The one place that starts child processes.

Everything in assay that runs a program (preflight probes, the wrap relay, tests' helpers if
they like) goes through this package, so deadlines, output caps and terminate -> kill -> reap
come from one trio concurrency model (docs/library.md, "Running child processes";
docs/architecture.md, "Child processes"). One module per job:

- :mod:`assay.proc.spawning`  starting a child (pipes, group, parent-death signal, start errors);
- :mod:`assay.proc.child`     a running child: pidfd waits, signals, terminate -> kill -> reap;
- :mod:`assay.proc.bounded`   runs under a deadline with capped outputs;
- :mod:`assay.proc.keeper`    the keeper process that owns a wrap run's process tree;
- :mod:`assay.proc.kept`      a server under the keeper, from our side;
- :mod:`assay.proc.handle`    :class:`ChildHandle`, what the wrap relay needs of a child.
"""

from __future__ import annotations

from assay.proc.bounded import BoundedResult, read_capped, run_bounded
from assay.proc.child import Child
from assay.proc.handle import ByteReceiver, ByteSender, ChildHandle
from assay.proc.kept import KeptChild, keeper_available, spawn_kept
from assay.proc.spawning import (
    DEVNULL,
    INHERIT,
    PIPE,
    ProgramNotFound,
    SpawnError,
    _candidate_exists as _candidate_exists,  # tests check the not-found rule directly
    spawn,
)

__all__ = [
    "ByteReceiver",
    "ByteSender",
    "Child",
    "ChildHandle",
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
]
