"""The one reader of a wrapped command line (docs/protect.md, "Which entries are wrapped";
docs/discover.md, "Output"): does ``[command, *args]`` run `assay mcp wrap`, with which options,
around which server?

`assay mcp protect` (which entries not in its record to leave alone; on ``--undo`` of a config
without a record, which lines to read back) and `assay mcp
discover` (which config entries and processes are wrapped) ask this module and nothing else, so
they cannot disagree. A line is wrapped only when

- its command is an assay executable (the basename is ``assay``, ``assay.exe``, ``assay.cmd`` or
  ``assay.bat``), or a Python interpreter running one (``python3 /venv/bin/assay``: how a
  console script shows in a process list), and
- what follows is ``mcp wrap <options> -- <command> [args...]``, or ``mcp wrap <options>`` with
  ``--url URL`` among them and no ``--`` (a remote server: docs/protect.md, "Remote servers"),
  the options read with wrap's
  own option table (:func:`assay.wrap.optionline.read_option_tokens`): a value option takes the next token
  (which must not start with ``-``) or is one ``--flag=value`` token, a flag takes none; each
  option at most once; a number is a plain one.

An unknown option, a repeated one, a missing value, a stray token, a missing ``--`` or nothing
after it: not wrapped. Words in a shell string (``sh -c "... assay mcp wrap ..."``), in a
server's own arguments or after someone else's ``--`` never make a line wrapped. What this
reader accepts, wrap starts with the same values (tests/protect/test_wrapped_entry.py checks it
against wrap's own parsers).

Sans-IO: tokens in, values out. Imports nothing but :mod:`assay.wrap.options` (a leaf).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from assay.wrap.optionline import plain_float, plain_int, read_option_tokens
from assay.wrap.options import BY_FLAG, URL_FLAG

__all__ = ["ASSAY_NAMES", "WrappedLine", "is_assay_executable", "parse_wrap_options", "parse_wrapped"]

ASSAY_NAMES = frozenset({"assay", "assay.exe", "assay.cmd", "assay.bat"})
_PYTHON = re.compile(r"(python|pypy)(\d+(\.\d+)*)?w?(\.exe)?\Z")


@dataclass(frozen=True)
class WrappedLine:
    """A wrap line, read. ``options``: WrapConfig field -> value, for the options the line gives
    (a str, an int, a float, or True for a flag). ``command``/``args``: the server, everything
    after the first ``--`` (empty for a remote server). ``url``: the ``--url`` of a remote server,
    else None. ``interpreter``: the Python in front of the assay script, if any (protect never
    writes one, so ``--undo`` leaves such a line alone). A repeatable option given more than once
    (``--header``) has a tuple of its values."""

    assay: str
    options: dict[str, object]
    command: str
    args: tuple[str, ...]
    interpreter: str | None = field(default=None)
    url: str | None = field(default=None)

    @property
    def server(self) -> list[str]:
        return [] if self.url is not None else [self.command, *self.args]


def _basename(token: str) -> str:
    return token.replace("\\", "/").rsplit("/", 1)[-1].lower()


def is_assay_executable(token: str) -> bool:
    return _basename(token) in ASSAY_NAMES


def _value(kind: type, text: str) -> object | None:
    if kind is int:
        number = plain_int(text)
        return number if number is not None and number >= 1 else None  # every int option is a positive count
    if kind is float:
        return plain_float(text)
    return text


def parse_wrap_options(
    tokens: Sequence[str], *, written_by_older: bool = False
) -> tuple[dict[str, object], list[str]] | None:
    """``tokens`` after ``mcp wrap`` -> (field -> value of the options given, the server argv),
    or None when wrap would not start with them (module docstring).

    ``written_by_older``: also read the lines an older `assay mcp protect` wrote for a server
    named like an option (``--label -- -- npx``: the value as the next token, whatever it is).
    Wrap refuses those lines, so they are not wrapped; only ``--undo`` of a config without a
    record reads them this way, to give the server back (docs/protect.md, "Undo")."""
    parsed = read_option_tokens(tokens, any_next=written_by_older)
    if parsed is None:
        return None
    options: dict[str, object] = {}
    for opt, text in parsed[0]:
        value = True if text is None else text if written_by_older else _value(opt.kind, text)
        if value is None:
            return None
        if opt.kind is tuple:  # a repeatable option (--header): every value, in order
            before = options.get(opt.field, ())
            value = (*(before if isinstance(before, tuple) else ()), value)
        options[opt.field] = value
    remote = _URL_FIELD is not None and _URL_FIELD in options
    if remote == bool(parsed[1]):  # a server, or --url: one of the two
        return None
    return options, parsed[1]


#: The WrapConfig field of ``--url``.
_URL_FIELD: str | None = BY_FLAG[URL_FLAG].field


def parse_wrapped(argv: Sequence[str], *, written_by_older: bool = False) -> WrappedLine | None:
    """``argv`` (a config entry's ``[command, *args]`` or a process's argv) -> the wrap line it
    is, or None (module docstring; ``written_by_older``: :func:`parse_wrap_options`)."""
    tokens = list(argv)
    interpreter = None
    if len(tokens) > 1 and _PYTHON.match(_basename(tokens[0])) and is_assay_executable(tokens[1]):
        interpreter = tokens.pop(0)
    if not tokens or not is_assay_executable(tokens[0]) or tokens[1:3] != ["mcp", "wrap"]:
        return None
    parsed = parse_wrap_options(tokens[3:], written_by_older=written_by_older)
    if parsed is None:
        return None
    options, server = parsed
    if not server:
        url = options[str(_URL_FIELD)]
        return WrappedLine(tokens[0], options, "", (), interpreter, url=url if isinstance(url, str) else None)
    return WrappedLine(tokens[0], options, server[0], tuple(server[1:]), interpreter)
