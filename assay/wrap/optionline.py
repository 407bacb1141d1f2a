"""`assay mcp wrap`'s options on a command line, read and written (docs/wrap.md, "Command line").

Over the table :mod:`assay.wrap.options` derives from the one declaration of wrap's options:

- :func:`read_option_tokens`, the one walk over a wrap line's options, and :func:`plain_int`,
  :func:`plain_float`, how a plain line's number values are read: wrap's fast parser
  (:func:`assay.cli.wrap_args.parse_fast`) and protect's reader of wrap lines
  (:mod:`assay.clients.wrapped`) use them;
- :func:`flag_of` and :func:`option_tokens`: the tokens of an option in a line assay writes
  (`assay mcp protect`, `assay mcp config-path`).

The table is read through the module (``options.BY_FLAG``), never copied, so a declaration
derived again (tests/test_wrap_args.py) reaches these too. A leaf module like :mod:`assay.wrap.options`: the standard library only, no trio; it is on the
start-up path of every wrap run.
"""

from collections.abc import Sequence

from assay.wrap import options
from assay.wrap.options import URL_FLAG, WrapOption

__all__ = ["flag_of", "option_tokens", "plain_float", "plain_int", "read_option_tokens"]

_DIGITS = frozenset("0123456789")


def plain_int(text: str) -> int | None:
    """A number option's value as wrap reads it on a plain command line: ASCII digits only, no
    sign, no underscores, no leading zero (int() and cyclopts agree on those), else None."""
    if not text or not _DIGITS.issuperset(text) or (len(text) > 1 and text[0] == "0") or len(text) > 18:
        return None
    return int(text)


def plain_float(text: str) -> float | None:
    """A seconds option's value as wrap reads it on a plain command line (``2``, ``0.5``), else None."""
    whole, dot, frac = text.partition(".")
    if plain_int(whole) is None or (dot and (not frac or not _DIGITS.issuperset(frac) or len(frac) > 9)):
        return None
    return float(text)


def read_option_tokens(
    tokens: Sequence[str], *, any_next: bool = False
) -> tuple[list[tuple[WrapOption, str | None]], list[str]] | None:
    """The one walk over a wrap line's options (docs/wrap.md, "Command line"): ``tokens`` after
    ``mcp wrap`` -> ((option, its value text, or None for a flag) in order, the tokens after the
    ``--`` that ends them), or None for an unknown or repeated option (a repeatable one, kind
    ``tuple``, may come any number of times), a flag given a value (``--dry-run=x``), a missing
    value, or no ``--`` (a line with ``--url`` ends without one: its command is ``[]``). A value is the text after ``=`` or the next
    token, which must not start with ``-`` unless ``any_next`` (the lines an older protect wrote,
    read by ``--undo``). What a value may be is the caller's: wrap's fast parser and the
    wrapped-line reader each check it their way."""
    given: list[tuple[WrapOption, str | None]] = []
    seen: set[str] = set()
    i, n = 0, len(tokens)
    while i < n:
        token = tokens[i]
        if token == "--":
            return given, list(tokens[i + 1 :])
        flag, eq, inline = token.partition("=")
        opt = options.BY_FLAG.get(flag)
        if opt is None or (flag in seen and opt.kind is not tuple):
            return None
        seen.add(flag)
        i += 1
        if opt.kind is bool:
            if eq:
                return None
            given.append((opt, None))
        elif eq:
            given.append((opt, inline))
        elif i < n and (any_next or not tokens[i].startswith("-")):
            given.append((opt, tokens[i]))
            i += 1
        else:
            return None  # a missing value ("--label -x" and "--label --" are read as one too)
    return (given, []) if URL_FLAG in seen else None  # no "--"


def flag_of(field: str) -> str:
    """The flag of the option that fills WrapConfig ``field`` (KeyError for no such option)."""
    return options.BY_FIELD[field].flag


def option_tokens(flag: str, value: str) -> list[str]:
    """The tokens that give a value option ``value`` in a command line assay writes (protect,
    config-path). A value that starts with ``-`` (a server named ``--`` or ``-x``, a path like
    ``-p.yaml``) would be read as an option of its own; joined to its flag it is only a value."""
    return [f"{flag}={value}"] if value.startswith("-") else [flag, value]
