"""wrap's cache of generated code (docs/wrap.md, "The code cache").

Classes made with :mod:`dataclasses` (assay's own) and with attrs (trio's, outcome's and attrs'
own) get their methods from source text the library writes and compiles when the class is
defined: ~15-25 ms of compiling on every wrap start on the 2-core dev machine, for text that is
the same every time. So while `assay mcp wrap` imports what it runs
(:func:`assay.cli.wrap_args.launch`), compiling a ``str`` goes through :class:`CodeCache`: the
code object of each (source text, file name, mode, compiler flags, optimization level) is kept,
marshalled, in the state directory under ``code-cache/<cache tag>.bin``, and the next start
takes it from there instead of compiling. A code object is a pure function of those inputs
under one interpreter (the file is named and headed by the interpreter's cache tag and bytecode
magic number), so a hit is the very code a compile would give; only the compile is skipped.

What goes through the cache, and only while it is installed (:meth:`CodeCache.installed`):
``compile(source, ...)`` of a ``str`` to a code object (its flags the ``__future__`` features,
inherited from the caller as ``compile`` inherits them), and ``exec(source, ...)`` of a ``str``
by :mod:`dataclasses` (as that module's own ``exec``). Everything else (bytes, ASTs, other
flags, other modules' ``exec``) is passed to the builtins as it was given.

attrs writes a per-process number into each class's ``__hash__`` (``hash((<seed>, self.a,
...))``, the hash of a string): such a text is kept with a placeholder for the number, and a hit
gets this process's number put back in its place (:func:`_seeded`), so the code is the one a
compile of the text gives. The file is written only when something was compiled (the first
start, an upgrade, a policy that needs a module no start needed before); a text compiled under
the file name of a kept one (a class that changed with an upgrade) replaces it. At most
:data:`MAX_ENTRIES` entries and :data:`MAX_BYTES` are kept (over that, what this start used).

Trust, as for the policy cache (:mod:`assay.wrap.policycache`): an entry is code wrap runs, so
the file is read only when the state directory and ``code-cache/`` are directories of this user
that no one else can write and the file is a regular file of this user (not a symlink) that no
one else can write; the same users who can write ``.pyc`` files or the user's shell start-up
files. Anything unusable (unreadable, foreign, broken) is ignored: the start compiles as if
there were no cache. A run never fails for the cache.
"""

from __future__ import annotations

import __future__
import builtins
import hashlib
import marshal
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib.util import MAGIC_NUMBER
from types import CodeType, ModuleType
from typing import Any

__all__ = ["FORMAT", "DIR_NAME", "MAX_ENTRIES", "MAX_BYTES", "CodeCache", "code_cache"]

FORMAT = b"assay.code_cache.v1\0"
DIR_NAME = "code-cache"
MAX_ENTRIES = 4096
MAX_BYTES = 8 << 20
#: every ``__future__`` feature's compiler flag: what ``compile`` inherits from its caller
_FUTURE_FLAGS = 0
for _name in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _name).compiler_flag


#: attrs' ``__hash__``: ``hash((`` and the class's seed alone on the next line
_HASH_SEED = re.compile(r"hash\(\(\n +(-?[0-9]+),\n")
#: the seed's placeholder in a kept text: beyond any hash (64 bits), so it is no other constant
_PLACEHOLDER = -(2**80) - 0x5EED


def _seeded(source: str) -> tuple[str, int] | None:
    """(the text with the placeholder for its seed, the seed) of an attrs ``__hash__``; None
    for any other text."""
    found = _HASH_SEED.search(source)
    if found is None:
        return None
    return source[: found.start(1)] + str(_PLACEHOLDER) + source[found.end(1) :], int(found.group(1))


def _with_constant(code: CodeType, old: int, new: int) -> CodeType:
    """``code`` (and the code nested in it) with the integer constant ``old`` replaced by
    ``new``."""
    consts = tuple(
        new if type(c) is int and c == old else _with_constant(c, old, new) if type(c) is CodeType else c
        for c in code.co_consts
    )
    return code.replace(co_consts=consts) if consts != code.co_consts else code


def _header() -> bytes:
    return FORMAT + MAGIC_NUMBER + (sys.implementation.cache_tag or "").encode("ascii", "replace") + b"\0"


class CodeCache:
    """The generated-code cache of one state directory (it may not exist yet: it is created,
    0700, when the cache is first written)."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.directory = os.path.join(state_dir, DIR_NAME)
        self.path = os.path.join(self.directory, f"{sys.implementation.cache_tag}.bin")
        self._loaded: dict[bytes, CodeType] | None = None
        self._used: dict[bytes, CodeType] = {}
        self._new: dict[bytes, CodeType] = {}
        self.hits = 0
        self.misses = 0
        self._had_exec = False

    # -- lookups -----------------------------------------------------------------------------

    def _entries(self) -> dict[bytes, CodeType]:
        if self._loaded is None:
            self._loaded = self._read()
        return self._loaded

    def _read(self) -> dict[bytes, CodeType]:
        from assay.wrap.policycache import _private_dir, _read_private

        if not (_private_dir(self.state_dir) and _private_dir(self.directory)):
            return {}
        raw = _read_private(self.path, MAX_BYTES)
        header = _header()
        if raw is None or not raw.startswith(header):
            return {}
        try:
            entries = marshal.loads(memoryview(raw)[len(header) :])
        except (ValueError, EOFError, TypeError):
            return {}
        if not isinstance(entries, dict) or not all(
            type(k) is bytes and type(v) is CodeType for k, v in entries.items()
        ):
            return {}
        return entries

    def compile(self, source: str, filename: str, mode: str, flags: int, optimize: int) -> CodeType:
        """``compile(source, filename, mode, flags, dont_inherit=True, optimize)``, from the
        cache when it has it (``flags``: ``__future__`` features only)."""
        if filename.startswith("<attrs generated"):
            seeded = _seeded(source)
            if seeded is not None:
                template, seed = seeded
                return _with_constant(self._compile(template, filename, mode, flags, optimize), _PLACEHOLDER, seed)
        return self._compile(source, filename, mode, flags, optimize)

    def _compile(self, source: str, filename: str, mode: str, flags: int, optimize: int) -> CodeType:
        if optimize == -1:  # the interpreter's own level (-O): part of the key as the level it is
            optimize = sys.flags.optimize
        key = hashlib.blake2b(
            b"%s\0%d\0%d\0%s\0%s"
            % (
                mode.encode("ascii", "replace"),
                flags,
                optimize,
                filename.encode("utf-8", "surrogatepass"),
                source.encode("utf-8", "surrogatepass"),
            ),
            digest_size=20,
        ).digest()
        found = self._used.get(key)
        if found is None:
            found = self._entries().get(key)
        if found is not None:
            self.hits += 1
            self._used[key] = found
            return found
        self.misses += 1
        code: CodeType = builtins_compile(source, filename, mode, flags, True, optimize)
        self._used[key] = self._new[key] = code
        return code

    # -- the hooks ---------------------------------------------------------------------------

    def _compile_hook(
        self,
        source: Any,
        filename: Any,
        mode: str,
        flags: int = 0,
        dont_inherit: bool = False,
        optimize: int = -1,
        **kw: Any,
    ) -> Any:
        if type(source) is not str or kw or flags & ~_FUTURE_FLAGS or not isinstance(filename, str):
            return builtins_compile(source, filename, mode, flags, dont_inherit, optimize, **kw)
        if not dont_inherit:
            flags |= sys._getframe(1).f_code.co_flags & _FUTURE_FLAGS
        return self.compile(source, filename, mode, flags, optimize)

    def _exec_hook_for(self, module: ModuleType) -> Callable[..., Any]:
        def exec_(source: Any, globals: Any = None, locals: Any = None, /, **kw: Any) -> Any:
            caller = sys._getframe(1)
            if type(source) is str:
                source = self.compile(source, "<string>", "exec", caller.f_code.co_flags & _FUTURE_FLAGS, -1)
            if globals is None:
                globals = caller.f_globals
                if locals is None:
                    locals = caller.f_locals
            return builtins_exec(source, globals, locals, **kw)

        return exec_

    def install(self) -> None:
        """Compile through the cache until :meth:`uninstall`."""
        import dataclasses

        global last
        last = self
        builtins.compile = self._compile_hook
        self._had_exec = "exec" in vars(dataclasses)
        dataclasses.exec = self._exec_hook_for(dataclasses)  # type: ignore[attr-defined]

    def uninstall(self) -> None:
        """Compile as before :meth:`install`."""
        import dataclasses

        builtins.compile = builtins_compile
        if not self._had_exec:
            vars(dataclasses).pop("exec", None)

    @contextmanager
    def installed(self) -> Iterator[CodeCache]:
        """Compile through the cache until the block ends (then :meth:`save`)."""
        self.install()
        try:
            yield self
        finally:
            self.uninstall()
            self.save()

    # -- writing -----------------------------------------------------------------------------

    def save(self) -> None:
        """Keep what was compiled anew (nothing when nothing was): with what this start used,
        and what else was kept unless a new text has its file name."""
        if not self._new:
            return
        renamed = {code.co_filename for code in self._new.values()} - {"<string>"}
        entries = {k: v for k, v in self._entries().items() if v.co_filename not in renamed}
        entries.update(self._used)
        if len(entries) > MAX_ENTRIES:
            entries = dict(self._used)
        self._new = {}
        try:
            body = _header() + marshal.dumps(entries)
        except ValueError:
            return
        if len(body) > MAX_BYTES:
            return
        try:
            _write(self.state_dir, self.directory, self.path, body)
        except (OSError, ValueError):
            pass  # a cache: a run never fails for it


builtins_compile = builtins.compile
builtins_exec = builtins.exec
#: the cache last installed (what tests read its counts from)
last: CodeCache | None = None


def code_cache(state_dir_option: str | None, env: Mapping[str, str]) -> CodeCache:
    """The cache of the state directory a wrap run with these options uses
    (:func:`assay.statedir.state_dir`)."""
    from assay.statedir import state_dir

    return CodeCache(state_dir(state_dir_option, env))


#: the cache of the window open now (:func:`open_window`), if one is
current: CodeCache | None = None


def open_window(state_dir_option: str | None, env: Mapping[str, str]) -> None:
    """Compile through the cache of this state directory until :func:`close_window`: wrap's
    imports (:func:`assay.cli.app.main` opens the window as early as the command line names the
    state directory, :func:`assay.cli.wrap_args.launch` once the run's config does). A window
    already open on another state directory is closed first, and what it compiled is not kept
    there."""
    global current
    cache = code_cache(state_dir_option, env)
    if current is not None:
        if current.state_dir == cache.state_dir:
            return
        current.uninstall()
        current = None
    cache.install()
    current = cache


def close_window() -> None:
    """Compile as before the window, and keep what it compiled (nothing if none is open)."""
    global current
    cache, current = current, None
    if cache is not None:
        cache.uninstall()
        cache.save()


def _write(state_dir: str, directory: str, path: str, body: bytes) -> None:
    """Write the file atomically (a new file renamed into place), creating the directories
    (0700): the policy cache's writer."""
    from assay.wrap.policycache import write_private

    write_private(state_dir, directory, path, path, body)
