"""Byte-level helpers of :mod:`assay.inspect.taint` (docs/inspect.md, "Value taint"): the
fold of every window of a text at once, the low-information test of every 16-byte window at
once, the decoders of the encodings :meth:`~assay.inspect.taint.TaintSet.find` looks through,
and the ring writes. Plain functions over bytes; the standard library only.
"""

from __future__ import annotations

import array
import binascii
import hashlib
import re
import sys
import urllib.parse
from functools import partial
from operator import methodcaller
from typing import Final

LITTLE: Final = sys.byteorder == "little"
B64_RUN: Final = re.compile(rb"[A-Za-z0-9+/_-]{11,}={0,2}")  # 8 bytes are 11 characters
HEX_RUN: Final = re.compile(rb"[0-9A-Fa-f]{16,}")  # 8 bytes are 16 digits
URLSAFE: Final = bytes.maketrans(b"-_", b"+/")
ZERO_ONE: Final = bytes([1]) + bytes(255)  # translate: 0 -> 1, else 0
FLIP: Final = bytes([1, 0]) + bytes(254)  # translate: 0 -> 1, 1 -> 0
BULK_PERCENT: Final = 256  # more '%' than this: the C-level decoder (see percent_decode)


def shifts(length: int) -> tuple[int, int, int]:
    """The bit shifts of the fold of a ``length``-byte window: four 32-bit slices spread over
    its ``8 * length`` bits (odd shifts, so byte-aligned repeats do not cancel)."""
    last = 8 * length - 32
    return (last // 3) | 1, (2 * last // 3) | 1, last


def fold(data: bytes, length: int, sbox: bytes) -> bytes:
    """For every offset ``i``, bytes ``[i, i+4)`` of the result are the pre of the window
    ``data[i:i+length]`` (read as a little-endian uint32): bits of the window only, each byte
    first put through the keyed permutation ``sbox`` (so text, hex or base64 spread over all
    32 bits)."""
    s1, s2, s3 = shifts(length)
    x = int.from_bytes(data.translate(sbox), "little")
    return (x ^ (x >> s1) ^ (x >> s2) ^ (x >> s3)).to_bytes(len(data), "little")


def sbox(key: bytes) -> bytes:
    """A permutation of the 256 byte values drawn from ``key``."""
    return bytes(sorted(range(256), key=lambda b: hashlib.blake2s(key + bytes([b])).digest()))


def uint32s(data: bytes) -> array.array[int]:
    out = array.array("I")
    if out.itemsize != 4:  # pragma: no cover - no supported platform
        out = array.array("L")
    out.frombytes(data)
    if not LITTLE:  # pragma: no cover - little-endian machines only in CI
        out.byteswap()
    return out


def percent_decode(data: bytes) -> bytes:
    """Percent-decoding; with many escapes, binascii's quoted-printable decoder (C) on the text
    with ``%`` made ``=``: the same bytes except around invalid escapes (a stray ``%``)."""
    if data.count(b"%") <= BULK_PERCENT:
        return urllib.parse.unquote_to_bytes(data)
    return binascii.a2b_qp(data.replace(b"=", b"=3D").replace(b"%", b"="))


def base64_views(data: bytes) -> list[bytes]:
    """Each base64 run (both alphabets) decoded at each of the four character alignments."""
    out: list[bytes] = []
    for match in B64_RUN.finditer(data):
        run = match.group().rstrip(b"=").translate(URLSAFE)
        for start in range(4):
            piece = run[start:]
            cut = len(piece) % 4
            if cut == 1:
                piece = piece[:-1]
            elif cut:
                piece += b"=" * (4 - cut)
            if len(piece) >= 12:
                try:
                    out.append(binascii.a2b_base64(piece))
                except binascii.Error:  # pragma: no cover - every run is the alphabet
                    pass
    return out


def hex_views(data: bytes) -> list[bytes]:
    """Each hex run decoded at both digit alignments."""
    out: list[bytes] = []
    for match in HEX_RUN.finditer(data):
        run = match.group()
        for start in (0, 1):
            piece = run[start : start + (len(run) - start) // 2 * 2]
            out.append(binascii.unhexlify(piece))
    return out


blake2s8 = partial(hashlib.blake2s, digest_size=8)
digest = methodcaller("digest")


def digest8(data: bytes) -> bytes:
    """The 8-byte BLAKE2s digest (the fingerprint, read little-endian)."""
    return hashlib.blake2s(data, digest_size=8).digest()


def lively(data: bytes) -> bytes:
    """Byte ``s`` is 1 when the window ``data[s:s+WINDOW]`` has 6 consecutive bytes that are all
    different, else 0 (a low-information window: indentation, padding, a repeated pattern).
    Computed for every offset at once: big-integer shifts over bytes of 0 and 1."""
    size = len(data)
    x = int.from_bytes(data, "little")
    same = [
        int.from_bytes((x ^ (x >> 8 * d)).to_bytes(size, "little").translate(ZERO_ONE), "little") for d in range(1, 6)
    ]  # same[d-1], byte q: data[q] == data[q+d]
    acc, spans = 0, []
    for d in range(5):
        acc |= same[d]
        spans.append(acc)  # spans[j], byte q: a repeat at a distance <= j+1 from q
    repeat = spans[4] | spans[3] >> 8 | spans[2] >> 16 | spans[1] >> 24 | spans[0] >> 32
    # repeat, byte p: data[p:p+6] holds a repeated byte; low: so do all 11 six-byte spans
    two = repeat & repeat >> 8
    four = two & two >> 16
    low = four & four >> 32 & four >> 56
    return low.to_bytes(size, "little").translate(FLIP)


def ring_write(part: array.array[int], slot: int, values: list[int], capacity: int) -> None:
    """Write ``values`` into the ring ``part`` from ``slot`` on (wrapping at ``capacity``),
    appending while it is not full."""
    at = 0
    while at < len(values):
        room = min(len(values) - at, capacity - slot)
        chunk = array.array(part.typecode, values[at : at + room])
        if slot == len(part):
            part.extend(chunk)
        else:
            part[slot : slot + room] = chunk
        at, slot = at + room, (slot + room) % capacity
