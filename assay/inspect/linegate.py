"""Whether a server's line can hold anything the detectors find, from its bytes alone
(docs/inspect.md, "Where wrap looks", "Speed").

Most answers hold nothing to find, and saying so should cost one pass over the line, not a walk
over its JSON value. :func:`quiet` runs the detectors' first look (the secret rules' prefilter
and the injection rules' gate, one RE2 set) over the line as it came. That reads every string of
the line exactly as the detectors would read it when

- the line has no backslash: no JSON escape, so each string's text is in the line as it is (a
  ``\\n``, ``\\u200b`` or ``\\"`` makes a character the bytes do not show), and
- the line is valid UTF-8 (``quiet`` checks it): RE2 reads the same characters a decoder does,

and the first look, being made of regexes that match wherever a rule could start in one string,
matches in the line wherever it matches in one of its strings (the bytes around a string, its
quotes, a member's name, only add matches, never take one away). A member whose name names a
secret (``"db_password": "..."``, with any JSON white space before the colon) is looked for too:
its value is a secret whatever the text says. So ``quiet`` is True only when no string of the
line can hold a finding. It is False for a line with a ``"blob"`` member (a
blob's text is looked at decoded, not as base64), and whenever it cannot tell: the caller then
reads the line the long way.

Sans-IO and stateless; google-re2 through :mod:`assay.inspect.prefilter` (without it, nothing is
quiet).

A line longer than 64 KiB is not looked at here (``quiet`` is False): its strings are few and
long, reading them costs little next to the detectors' pass, which the line's one would only
repeat when the line is not quiet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from assay.inspect.prefilter import Prefilter, literal

__all__ = ["checker", "quiet"]

_GATES: dict[tuple[bool, bool, tuple[str, ...]], Prefilter] = {}
_LONGEST: Final = 64 << 10


def _gate(secrets: bool, injection: bool, also: tuple[str, ...] = ()) -> Prefilter:
    gate = _GATES.get((secrets, injection, also))
    if gate is None:
        from assay.inspect.injection import GATE
        from assay.inspect.secret_keys import MEMBER_NAME
        from assay.inspect.secret_rules import PREFILTER

        # the secret rules' first look, and a member whose name names a secret (its value is one
        # whatever the text around it: scan's member rule)
        alternatives = (PREFILTER.alternatives + [MEMBER_NAME] if secrets else []) + (
            GATE.alternatives if injection else []
        )
        # and what the bytes cannot tell about: an escape, a blob (in the same pass); and the
        # caller's own literals
        extra = [literal(word) for word in also]
        gate = _GATES[secrets, injection, also] = Prefilter([alternatives + [r"\\", literal('"blob"')] + extra])
    return gate


def checker(
    secrets: bool, injection: bool, *, longest: int = _LONGEST, also: tuple[str, ...] = ()
) -> Callable[[bytes], bool]:
    """:func:`quiet` for one choice of detectors, as one call. With ``longest``, a line longer
    than that is not quiet either (64 KiB at most); with ``also``, nor is a line that holds one
    of those literals (what the caller wants read the long way, told in the same pass)."""
    longest = min(longest, _LONGEST)
    if not (secrets or injection):  # nothing to find: only the length and the literals
        words = [word.encode() for word in also]
        return lambda line: len(line) <= longest and not any(word in line for word in words)
    gate = _gate(secrets, injection, also)
    match, every, count = gate.matcher()
    regexes = gate.engine_regexes

    def check(line: bytes) -> bool:
        nonlocal match, count
        if len(line) > longest:
            return False
        if not line.isascii():
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                return False
        if len(regexes) != count:  # regexes were added to the shared set since: compiled anew
            match, _every, count = gate.matcher()
        if match is None or every is None:  # no engine, or it refused a regex: cannot tell
            return False
        try:
            found = match(line)
        except Exception:  # noqa: BLE001 - cannot tell: the long way
            return False
        # (an escape, a blob or one of ``also``: not quiet, in the same pass)
        return not found or every.isdisjoint(found)

    return check


def quiet(line: bytes, *, secrets: bool, injection: bool) -> bool:
    """True when no string of the JSON text ``line`` can hold a finding of the secret rules
    (``secrets``) or the injection rules (``injection``); False when one can, or when the line's
    bytes cannot tell (an escape, a blob, not valid UTF-8), or it is longer than 64 KiB."""
    if not (secrets or injection):
        return True
    check = _CHECKERS.get((secrets, injection))
    if check is None:
        check = _CHECKERS[secrets, injection] = checker(secrets, injection)
    return check(line)


_CHECKERS: dict[tuple[bool, bool], Callable[[bytes], bool]] = {}
