"""Client-frame admission for the wrap relay: bytes in, verdict out (sans-IO).

Splitting (docs/wrap.md, "Client frames"): LF only; a trailing CR belongs to the terminator; a
line longer than the cap is never buffered whole, it is discarded up to its newline and reported
once as ``frame_too_large``. Admission (same section): one strict JSON object, unique member names
at every depth, a string ``method`` when present. When a line has several faults, the first in the
order of that section's table is reported.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import msgspec

from assay.framing import BoundedLineSplitter
from assay.strictjson import (
    DuplicateFlag,
    DuplicateMemberError,
    bounded_int,
    finite_float,
    refuse_constant,
    unique_pairs,
)

DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 128  # serde_json's recursion limit (docs/wrap.md, "Client frames")


class RejectReason(StrEnum):
    """Why a client line was refused, in the order a line with several faults reports them
    (docs/wrap.md, "Client frames"). The values are the strings on the wire (the rejection's
    ``error.data.reason``) and in the records."""

    FRAME_TOO_LARGE = "frame_too_large"
    INVALID_UTF8 = "invalid_utf8"
    EMBEDDED_LINE_BREAK = "embedded_line_break"
    MALFORMED_JSON = "malformed_json"
    BATCH = "batch"
    NOT_AN_OBJECT = "not_an_object"
    DUPLICATE_MEMBER = "duplicate_member"
    NON_STRING_METHOD = "non_string_method"


FRAME_TOO_LARGE = RejectReason.FRAME_TOO_LARGE
INVALID_UTF8 = RejectReason.INVALID_UTF8
EMBEDDED_LINE_BREAK = RejectReason.EMBEDDED_LINE_BREAK
MALFORMED_JSON = RejectReason.MALFORMED_JSON
BATCH = RejectReason.BATCH
NOT_AN_OBJECT = RejectReason.NOT_AN_OBJECT
DUPLICATE_MEMBER = RejectReason.DUPLICATE_MEMBER
NON_STRING_METHOD = RejectReason.NON_STRING_METHOD


@dataclass(frozen=True, slots=True)
class Admitted:
    """An admitted frame. ``raw`` is the line exactly as read, terminator included."""

    raw: bytes
    frame: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Rejected:
    """A frame refused locally. ``raw`` is kept only for its digest and never echoed; an
    over-long frame has no ``raw`` (it was never held) but carries its ``digest``."""

    raw: bytes
    reason: RejectReason
    digest: str | None = None

    @property
    def frame_digest(self) -> str:
        return self.digest if self.digest is not None else frame_digest(self.raw)


# -- strict JSON ----------------------------------------------------------------------------------


# The hooks are assay.strictjson's, defined once for every reader. A repeated name in the fast
# path raises DuplicateMemberError (caught as _Duplicate, before ValueError, in admit()).
_Duplicate = DuplicateMemberError

# Decoders are shared by the whole process: admission is synchronous and never re-entered.
# The fast one parses integers in C and aborts on a repeated name; the careful one checks every
# integer (serde reads an integer too long for a double as infinity and refuses it) and flags
# duplicates without aborting, so that the documented order of faults can be honoured.
_DECODER = json.JSONDecoder(object_pairs_hook=unique_pairs, parse_constant=refuse_constant, parse_float=finite_float)
_PAIRS = DuplicateFlag()
_DECODER_CAREFUL = json.JSONDecoder(
    object_pairs_hook=_PAIRS, parse_constant=refuse_constant, parse_float=finite_float, parse_int=bounded_int
)
# Rare content that needs a closer look: a digit run that may overflow a double, or a \u escape
# of a surrogate (which must be part of a valid pair). Cheap substring and length tests first.
_LONG_DIGITS = re.compile(rb"\d{309}")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _needs_care(content: bytes) -> bool:
    return bool(
        (b"\\u" in content and _SURROGATE_ESCAPE.search(content))
        or (len(content) >= 309 and _LONG_DIGITS.search(content))
    )


_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_ONE_KIND = bytes.maketrans(b"{}", b"[]")
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_DEPTH_BLOCK = 1 << 20


def too_deep(content: bytes) -> bool:
    """Nesting deeper than MAX_DEPTH, counted outside strings, in linear time at C speed (also
    the serve front's check of a POST body: docs/serve.md, "How a request flows").

    Only brackets matter, ``{`` and ``[`` alike; they are walked in blocks with the depth
    carried from block to block. A block whose opens cannot reach the limit is skipped at once
    (a line of ``[`` is decided in its first block). Otherwise :func:`_block_exceeds` finds the
    block's deepest point. An unbalanced sequence is malformed JSON whichever way this answers.
    """
    if content.count(b"[") + content.count(b"{") <= MAX_DEPTH:
        return False
    if b'"' in content:
        content = _STRINGS.sub(b"", content)
    brackets = content.translate(_ONE_KIND, _BRACKETS)
    depth = 0
    for start in range(0, len(brackets), _DEPTH_BLOCK):
        block = brackets[start : start + _DEPTH_BLOCK]
        opens = block.count(b"[")
        if depth + opens > MAX_DEPTH and _block_exceeds(block, MAX_DEPTH - depth):
            return True
        depth += 2 * opens - len(block)
    return False


def _peak(block: bytes) -> int:
    """The highest depth reached in ``block`` relative to its start (0 at least).

    Cut at every ``][``, a block is pieces of opens-then-closes; a piece peaks after its
    opens, at "depth before the piece + its opens", and the ``]`` and ``[`` that the cut
    removed cancel out. map/accumulate keep the loop in C.
    """
    pieces = block.split(b"][")
    opens = list(map(bytes.count, pieces, itertools.repeat(b"[")))
    nets = map(operator.sub, map(operator.mul, opens, itertools.repeat(2)), map(len, pieces))
    before = itertools.accumulate(nets, initial=0)
    peak: int = max(0, max(map(operator.add, before, opens)))
    return peak


def _block_exceeds(block: bytes, room: int) -> bool:
    """Does ``block`` go more than ``room`` levels above its start?

    A block with many short alternations (``[],[],...``) would be many pieces: first remove
    adjacent ``[]`` pairs a few times (each pass lowers the peak by at most one, so the peak of
    what is left plus the passes bounds it); only when that bound is too high is the block
    walked exactly.
    """
    if block.count(b"][") * 16 > len(block):
        reduced, passes = block, 0
        while passes < 8:
            shorter = reduced.replace(b"[]", b"")
            if len(shorter) == len(reduced):
                break
            reduced, passes = shorter, passes + 1
        if _peak(reduced) + passes <= room:
            return False
    return _peak(block) > room


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _content(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return line[:-2]
    if line.endswith(b"\n"):
        return line[:-1]
    return line


def frame_digest(line: bytes) -> str:
    """Hex SHA-256 of a line's bytes without its terminator (a receipt's ``frame_digest``)."""
    return hashlib.sha256(_content(line)).hexdigest()


def admit(line: bytes) -> Admitted | Rejected | None:
    """Judge one client line (terminator included). None means blank: ignore it entirely."""
    content = line[:-2] if line.endswith(b"\r\n") else line[:-1] if line.endswith(b"\n") else line
    if not content.strip(b" \t"):
        return None
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return Rejected(line, INVALID_UTF8)
    if "\r" in text:
        return Rejected(line, EMBEDDED_LINE_BREAK)
    if too_deep(content):
        return Rejected(line, MALFORMED_JSON)
    if not _needs_care(content):
        try:
            value = _DECODER.decode(text)  # whitespace around the value allowed, nothing else
        except _Duplicate:
            return _admit_carefully(line, text)
        except (ValueError, RecursionError):
            return Rejected(line, MALFORMED_JSON)
        if type(value) is dict:
            method = value.get("method", "")
            if method.__class__ is not str and "method" in value:
                return Rejected(line, NON_STRING_METHOD)
            return Admitted(line, value)
        return Rejected(line, BATCH if isinstance(value, list) else NOT_AN_OBJECT)
    return _admit_carefully(line, text)


_MSG_DECODE = msgspec.json.Decoder().decode
_MSG_ENCODE = msgspec.json.Encoder().encode
_LONG_RUN = b"0" * 309


def admit_region(region: bytes, lines: list[bytes]) -> list[dict[str, Any]] | None:
    """The frames of a run of whole lines when every one of them is admitted, read the fast
    way; None when any line needs the careful reading of :func:`admit` (then the caller judges
    line by line, and gets exactly :func:`admit`'s verdicts).

    ``lines`` is ``region`` split at LF, terminators removed. The fast reading (msgspec) is as
    strict as :func:`admit` wherever it accepts: it refuses ``NaN``, trailing commas, raw
    control characters, invalid UTF-8 and lone surrogates. What it would let through is
    checked here: a CR anywhere (a CRLF terminator or an embedded line break), nesting deeper
    than MAX_DEPTH, a digit run long enough to overflow a double, and repeated member names.
    Repeats are found exactly by counting colons: outside strings every colon separates one
    member, a repeat is lost when decoded, and re-encoding never adds a colon; so the counts
    agree exactly when no member was lost, provided no escape spells a colon (``\\u003a``;
    such regions go the careful way).
    """
    if b"\r" in region or b"\\u003" in region:
        return None
    if not region.isascii():
        try:
            region.decode("utf-8")
        except UnicodeDecodeError:
            return None
    decode = _MSG_DECODE
    frames: list[dict[str, Any]] = []
    append = frames.append
    for line in lines:
        try:
            value = decode(line)
        except (msgspec.DecodeError, RecursionError, ValueError):
            return None
        if value.__class__ is not dict or value.get("method", "").__class__ is not str:
            return None
        # deeper than MAX_DEPTH takes more than 2 * MAX_DEPTH brackets
        if len(line) > 2 * MAX_DEPTH and line.count(b"[") + line.count(b"{") > MAX_DEPTH and too_deep(line):
            return None
        append(value)
    if len(region) >= 309 and max(map(len, lines)) >= 309:
        if has_long_digit_run(region):
            return None
    if _MSG_ENCODE(frames).count(b":") != region.count(b":"):
        return None
    return frames


def has_long_digit_run(data: bytes) -> bool:
    """A run of 309 or more digits (an integer that may overflow a double) anywhere."""
    return _LONG_RUN in data.translate(_TO_ZERO_OR_SPACE)


_TO_ZERO_OR_SPACE = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))


def _admit_carefully(line: bytes, text: str) -> Admitted | Rejected:
    """The slow path: every integer checked, lone surrogates found, duplicates ranked."""
    _PAIRS.duplicate = False
    try:
        value = _DECODER_CAREFUL.decode(text)
    except (ValueError, RecursionError):
        return Rejected(line, MALFORMED_JSON)
    if _has_lone_surrogate(value):
        return Rejected(line, MALFORMED_JSON)
    if isinstance(value, list):
        return Rejected(line, BATCH)
    if not isinstance(value, dict):
        return Rejected(line, NOT_AN_OBJECT)
    if _PAIRS.duplicate:
        return Rejected(line, DUPLICATE_MEMBER)
    if "method" in value and not isinstance(value["method"], str):
        return Rejected(line, NON_STRING_METHOD)
    return Admitted(line, value)


# -- splitting ------------------------------------------------------------------------------------


def _too_large(_nbytes: int, digest: str | None) -> Rejected:
    return Rejected(b"", FRAME_TOO_LARGE, digest)


class LineSplitter(BoundedLineSplitter[Rejected]):
    """Cut a byte stream into LF-terminated lines without ever holding more than the cap: the
    shared :class:`assay.framing.BoundedLineSplitter`, its over-long lines reported as
    :class:`Rejected` (``frame_too_large``, with the digest of the line's bytes).

    ``feed`` returns complete lines (bytes, terminator included) in order; ``close`` returns the
    unterminated final line, if any. The cap counts the line without its terminator (``\\n`` or
    ``\\r\\n``); see docs/wrap.md, "Client frames".
    """

    __slots__ = ()

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        super().__init__(max_frame_bytes, _too_large, digest=True)
