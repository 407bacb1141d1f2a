"""`assay mcp wrap`'s fast command-line parser, used on the start-up path.

The options are :data:`assay.wrap.options.WRAP_OPTIONS`, the table derived from the one
declaration of wrap's options (:class:`assay.wrap.options.WrapOptions`: flag, parameter name of
the cyclopts command in :mod:`assay.cli.wrap`, the :class:`~assay.wrap.run.WrapConfig` field,
value kind, default, help text); its names are re-exported here for older imports.

:func:`parse_fast` reads the plain, well-formed command lines (every token before ``--`` a known
option given once, with a plain value) without importing cyclopts, which costs ~100 ms of
start-up. Anything else (``--help``, an unknown or repeated option, a missing value, a value that
starts with ``-``, a number cyclopts might read differently, nothing after ``--``) returns
``None`` and the caller falls back to the cyclopts command, so every help text and usage error
is cyclopts' own. tests/test_wrap_args.py checks the two agree over generated command lines.

No heavy imports here: this module is on the start-up path of every wrap run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING

from assay.wrap import options
from assay.wrap.options import (  # noqa: F401  (re-exported: older imports)
    BY_FLAG,
    DEFAULT_LABEL,
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_POLICY,
    DEFAULT_SHUTDOWN_GRACE,
    WRAP_OPTIONS,
    WrapOption,
    defaults,
)
from assay.wrap.optionline import option_tokens, plain_float, plain_int, read_option_tokens  # noqa: F401  (option_tokens: older imports)

if TYPE_CHECKING:
    from assay.proc.keeper import Forked
    from assay.wrap.run import WrapConfig


def parse_fast(tokens: Sequence[str]) -> tuple[dict[str, object], list[str]] | None:
    """``tokens`` after ``mcp wrap`` -> (param -> value for every option, server command), or
    ``None`` when the line is not a plain one and the cyclopts command must read it."""
    parsed = read_option_tokens(tokens)
    if parsed is None or bool(parsed[1]) == any(opt.flag == options.URL_FLAG for opt, _ in parsed[0]):
        return None  # no command and no --url, or both: cyclopts says so
    values = options.defaults()
    repeated: dict[str, list[str]] = {}
    for opt, text in parsed[0]:
        value: object
        if text is None:
            value = True
        elif not text or text.startswith("-"):
            return None
        elif opt.kind is int:
            value = plain_int(text)
        elif opt.kind is float:
            value = plain_float(text)
        elif opt.kind is tuple:
            repeated.setdefault(opt.param, []).append(text)
            value = tuple(repeated[opt.param])
        else:
            value = text
        if value is None:
            return None
        values[opt.param] = value
    return values, parsed[1]


def config_from(values: dict[str, object], command: Sequence[str]) -> WrapConfig:
    """A :class:`~assay.wrap.run.WrapConfig` from parsed values; a bad value is a UsageError."""
    check_values(values, command)
    from assay.wrap.run import WrapConfig

    fields = {opt.field: values[opt.param] for opt in options.WRAP_OPTIONS}
    return WrapConfig(argv=list(command), **fields)  # type: ignore[arg-type]


def check_values(values: dict[str, object], command: Sequence[str]) -> None:
    """A bad value is a UsageError (nothing imported but the error type)."""
    from assay.cli.errors import UsageError

    if values["url"] is not None and command:
        raise UsageError("--url and a command after -- exclude each other: give one")
    if not command and values["url"] is None:
        raise UsageError("missing the command to wrap: assay mcp wrap [OPTIONS] -- <command> [args...] (or --url URL)")
    if values["transport"] not in options.TRANSPORTS:
        raise UsageError(f"--transport must be one of {', '.join(options.TRANSPORTS)}")
    if values["login"] not in options.LOGIN_MODES:
        raise UsageError(f"--login must be one of {', '.join(options.LOGIN_MODES)}")
    max_frame_bytes = values["max_frame_bytes"]
    shutdown_grace = values["shutdown_grace"]
    assert isinstance(max_frame_bytes, int) and isinstance(shutdown_grace, (int, float))
    if max_frame_bytes < 1:
        raise UsageError("--max-frame-bytes must be a positive integer")
    log_arguments_max = values["log_arguments_max"]
    assert isinstance(log_arguments_max, int)
    if log_arguments_max < 1:
        raise UsageError("--log-arguments-max must be a positive integer")
    log_max_bytes = values["log_max_bytes"]
    assert isinstance(log_max_bytes, int)
    if log_max_bytes < 0:
        raise UsageError("--log-max-bytes must be 0 (never rotate) or a positive integer")
    if not (shutdown_grace >= 0 and shutdown_grace != float("inf")):
        raise UsageError("--shutdown-grace must be a non-negative number of seconds")


def launch(config: WrapConfig) -> int:
    """Run one wrap session under trio; a fatal start-up error is one `fatal: ...` line, exit 2.

    For a command: the run is checked and its policy loaded (:func:`assay.wrap.run.prepare_wrap`),
    its server started (:func:`start_early`), and then trio, the relay and the session are
    imported while the server starts (docs/testing.md, "Start-up of `assay mcp wrap`"); the
    run takes the server over, or it is ended here: nothing of it is left running when this
    returns. A pause of the garbage collector for the imports (:func:`assay.cli.app.main`'s)
    ends before the run starts."""
    import sys

    from assay.cli.errors import fatal
    from assay.wrap.errors import WrapError

    early: Forked | None = None
    try:
        with compiling_through_cache(config):
            from assay.wrap.run import prepare_wrap, run_prepared, run_wrap

            if config.url is not None:
                import_trio()
                prepared = None
            else:
                prepared = prepare_wrap(config)
                try:
                    early = start_early(config)
                    import_trio()

                    import assay.session.session  # noqa: F401  (what run_prepared imports first: here, before
                    import assay.shells.stdio.relay  # noqa: F401  the collector is resumed)
                except BaseException:
                    prepared.close()
                    raise
        import trio

        resume_gc()
        if prepared is None:
            return trio.run(run_wrap, config)
        return trio.run(partial(run_prepared, prepared, early=early))
    except WrapError as exc:
        sys.stdout.flush()
        return fatal(str(exc))
    finally:
        if early is not None:
            early.abandon()  # the run ended before it took the server over


@contextmanager
def compiling_through_cache(config: WrapConfig) -> Iterator[None]:
    """While wrap imports what it runs, generated code (dataclasses', attrs') is compiled
    through the state directory's code cache (:mod:`assay.wrap.codecache`; docs/wrap.md,
    "The code cache"): the window :func:`assay.cli.app.main` opened, when it named this state
    directory, else one opened now."""
    import os

    from assay.wrap import codecache

    codecache.open_window(config.state_dir, os.environ)
    try:
        yield
    finally:
        codecache.close_window()


#: :func:`assay.cli.app.main` paused the cyclic garbage collector for a wrap's imports (it was
#: on): :func:`resume_gc` ends the pause
gc_paused = False


def resume_gc() -> None:
    """End :func:`assay.cli.app.main`'s pause of the garbage collector, if there is one (a
    collector the caller had disabled stays disabled)."""
    global gc_paused
    if gc_paused:
        gc_paused = False
        import gc

        gc.enable()


def start_early(config: WrapConfig) -> Forked | None:
    """Start the server of a checked run under its keeper before trio, the relay and the
    session are imported (docs/testing.md, "Start-up of `assay mcp wrap`"): the server starts
    while wrap imports them. None for ``--url``, and where the keeper is not available (the
    relay spawns the server then)."""
    import os

    from assay.proc import keeper

    if config.url is not None or not keeper.keeper_available():
        return None
    from assay.wrap.run import child_environment

    import subprocess  # noqa: F401  (the keeper starts the server with it: imported once, before the fork)

    return keeper.fork_keeper(config.argv, child_environment(config, os.environ))


def import_trio() -> None:
    """Import trio without ``ctypes.util`` and the `ldconfig -p` child its import starts.

    trio imports ``ctypes.util`` and calls ``find_library("pthread")`` once, when it is imported
    (to name its worker threads). On Linux that runs `/sbin/ldconfig -p` and parses its output (a
    fork, an exec and 5-20 ms of every wrap start on the loaded 2-core dev machine), and the
    import of ``ctypes.util`` itself brings shutil, tempfile, random and the compression modules
    (~5 ms more) that nothing else on wrap's start-up path needs. So while trio is imported,
    ``ctypes.util`` is a stand-in module whose one function answers ``"libpthread.so.0"`` where
    that library opens (the answer find_library gives on glibc); anywhere else (musl, not Linux,
    any other name) it drops the stand-in and asks the real ``ctypes.util``. Once trio is
    imported the stand-in is gone: a later ``import ctypes.util`` gets the real module.
    """
    import sys

    if "trio" in sys.modules:
        return
    import ctypes

    real_util = sys.modules.get("ctypes.util")
    stand_in = ModuleType("ctypes.util")

    def drop_stand_in() -> None:
        if sys.modules.get("ctypes.util") is stand_in:
            del sys.modules["ctypes.util"]
        if getattr(ctypes, "util", None) is stand_in:
            if real_util is None:
                del ctypes.util
            else:
                ctypes.util = real_util

    def find_library(name: str) -> str | None:
        if name == "pthread" and sys.platform.startswith("linux"):
            try:
                ctypes.CDLL("libpthread.so.0")
            except OSError:
                pass
            else:
                return "libpthread.so.0"
        drop_stand_in()
        from importlib import import_module

        real: str | None = import_module("ctypes.util").find_library(name)
        return real

    stand_in.find_library = find_library  # type: ignore[attr-defined]
    sys.modules["ctypes.util"] = stand_in
    ctypes.util = stand_in
    lazy = [LazyModule(name) for name in LAZY_FOR_TRIO if name not in sys.modules]
    sys.modules.update((module.__name__, module) for module in lazy)
    try:
        import trio  # noqa: F401
    finally:
        drop_stand_in()
        for module in lazy:
            module.leave()


#: modules trio imports at once and uses only inside functions (:func:`import_trio`)
LAZY_FOR_TRIO = ("ssl", "idna")


class LazyModule(ModuleType):
    """A stand-in in ``sys.modules`` for the module of its name, not imported yet: the first
    attribute read from it imports the real module (and takes the stand-in out of
    ``sys.modules`` first), and every read is then the real module's."""

    def __getattr__(self, name: str) -> object:
        real = self.__dict__.get("_real")
        if real is None:
            import importlib

            self.leave()
            real = importlib.import_module(self.__name__)
            self.__dict__["_real"] = real
        return getattr(real, name)

    def leave(self) -> None:
        """Out of ``sys.modules`` (a later import gets the real module)."""
        import sys

        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]


def run(values: dict[str, object], command: Sequence[str]) -> int:
    """Parse result -> exit status: the one place both parsers hand a wrap run to."""
    return launch(config_from(values, command))
