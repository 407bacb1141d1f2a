"""Starting one child: pipes, process group, the parent-death signal, and what a failed start
means (docs/library.md, "Running child processes").

Why not ``trio.lowlevel.open_process``: it calls ``Popen`` in a worker thread, and Linux ties
``PR_SET_PDEATHSIG`` to the *thread* that forked, so a relay child would be SIGKILLed when trio's
idle worker thread retires. We fork from the trio thread itself (a fork is cheap) and wait on a
pidfd (:mod:`assay.proc.child`), which keeps waiting cancellable without a thread per child.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio

from assay.proc.child import Child
from assay.proc.keeper import _PR_SET_PDEATHSIG, ProgramNotFound, SpawnError, _prctl

__all__ = ["DEVNULL", "INHERIT", "PIPE", "ProgramNotFound", "SpawnError", "spawn"]

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
INHERIT = None


def _make_preexec(parent_pid: int) -> Callable[[], None]:
    """Child-side setup between fork and exec: die with the parent (docs/wrap.md, "Lifecycle and exit status").

    The getppid() check closes the race where the parent died before prctl ran.
    """
    prctl = _prctl

    def preexec() -> None:  # runs in the forked child: no allocation-heavy work
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent_pid:
                os._exit(137)

    return preexec


def _candidate_exists(program: str, env: Mapping[str, str] | None) -> bool:
    """Is there a file that exec would have tried for ``program`` (PATH search for bare names)?"""
    if os.sep in program:
        return os.path.isfile(program)
    return any(os.path.isfile(os.path.join(d, program)) for d in os.get_exec_path(env))


def _stream_arg(kind: int | None, name: str, to_child: bool) -> tuple[int | None, int | None, int | None]:
    """Return (popen_arg, parent_fd_or_None, child_fd_to_close_or_None)."""
    if kind is PIPE:
        r, w = os.pipe2(os.O_CLOEXEC)
        if to_child:
            return r, w, r
        return w, r, w
    if kind is None or kind is DEVNULL or isinstance(kind, int):
        return kind, None, None
    raise ValueError(f"unsupported {name} disposition: {kind!r}")


def spawn(
    argv: Sequence[str | os.PathLike[str]],
    *,
    stdin: int | None = PIPE,
    stdout: int | None = PIPE,
    stderr: int | None = PIPE,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    own_group: bool = False,
    die_with_parent: bool = False,
) -> Child:
    """Start ``argv`` and return a :class:`Child`. Must be called from the trio thread.

    ``own_group`` puts the child in a new process group (so a stop can reach its descendants);
    ``die_with_parent`` asks Linux to SIGKILL it when this process dies (docs/library.md,
    "Running child processes").
    Raises :class:`ProgramNotFound` for ENOENT and :class:`SpawnError` for any other failure.
    """
    opened: list[int] = []
    to_close_after: list[int] = []
    try:
        a_in, p_in, c_in = _stream_arg(stdin, "stdin", True)
        for fd in (p_in, c_in):
            if fd is not None:
                opened.append(fd)
        a_out, p_out, c_out = _stream_arg(stdout, "stdout", False)
        for fd in (p_out, c_out):
            if fd is not None:
                opened.append(fd)
        a_err, p_err, c_err = _stream_arg(stderr, "stderr", False)
        for fd in (p_err, c_err):
            if fd is not None:
                opened.append(fd)
        to_close_after = [fd for fd in (c_in, c_out, c_err) if fd is not None]
        kwargs: dict[str, Any] = {}
        if own_group:
            kwargs["process_group"] = 0
        if die_with_parent:
            kwargs["preexec_fn"] = _make_preexec(os.getpid())
        try:
            popen = subprocess.Popen(
                [os.fspath(a) for a in argv],
                stdin=a_in,
                stdout=a_out,
                stderr=a_err,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                close_fds=True,
                **kwargs,
            )
        except FileNotFoundError as exc:
            program = os.fspath(argv[0])
            if cwd is not None and not os.path.isdir(cwd):
                raise SpawnError(exc.errno, exc.strerror, os.fspath(cwd)) from None
            if _candidate_exists(program, env):
                # The file is there but exec said ENOENT: its #! interpreter is missing
                # (docs/library.md, "Running child processes"). That is "cannot start", not "not found".
                raise SpawnError(errno.ENOEXEC, "cannot execute (interpreter not found)", program) from None
            raise ProgramNotFound(exc.errno, exc.strerror, program) from None
        except OSError as exc:
            raise SpawnError(exc.errno or errno.EIO, exc.strerror or str(exc), os.fspath(argv[0])) from None
        except subprocess.SubprocessError as exc:
            raise SpawnError(errno.EIO, str(exc), os.fspath(argv[0])) from None
    except BaseException:
        for fd in opened:
            try:
                os.close(fd)
            except OSError:
                pass
        raise
    for fd in to_close_after:
        os.close(fd)
    return Child(
        popen,
        trio.lowlevel.FdStream(p_in) if p_in is not None else None,
        trio.lowlevel.FdStream(p_out) if p_out is not None else None,
        trio.lowlevel.FdStream(p_err) if p_err is not None else None,
        own_group,
    )
