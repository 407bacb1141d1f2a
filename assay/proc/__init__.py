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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assay.proc.bounded import BoundedResult, read_capped, run_bounded
    from assay.proc.child import Child
    from assay.proc.handle import ByteReceiver, ByteSender, ChildHandle
    from assay.proc.kept import KeptChild, adopt_kept, keeper_available, spawn_kept
    from assay.proc.spawning import (
        DEVNULL,
        INHERIT,
        PIPE,
        ProgramNotFound,
        SpawnError,
        _candidate_exists as _candidate_exists,  # tests check the not-found rule directly
        spawn,
    )

# Each name is loaded from its module on first use: wrap forks the keeper
# (:func:`assay.proc.keeper.fork_keeper`) before it imports trio, which every other module of
# this package needs (docs/testing.md, "Start-up of `assay mcp wrap`").
_WHERE = {
    "BoundedResult": "bounded",
    "read_capped": "bounded",
    "run_bounded": "bounded",
    "Child": "child",
    "ByteReceiver": "handle",
    "ByteSender": "handle",
    "ChildHandle": "handle",
    "KeptChild": "kept",
    "adopt_kept": "kept",
    "keeper_available": "kept",
    "spawn_kept": "kept",
    "DEVNULL": "spawning",
    "INHERIT": "spawning",
    "PIPE": "spawning",
    "ProgramNotFound": "spawning",
    "SpawnError": "spawning",
    "_candidate_exists": "spawning",
    "spawn": "spawning",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'assay.proc' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"assay.proc.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ByteReceiver",
    "ByteSender",
    "Child",
    "ChildHandle",
    "KeptChild",
    "adopt_kept",
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
