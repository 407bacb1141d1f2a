"""Value taint: a bounded set of fingerprints of what came back marked secret
(docs/inspect.md, "Value taint").

:class:`TaintSet` remembers secret values (:meth:`~TaintSet.add_value`) and whole tainted
result texts (:meth:`~TaintSet.add_text`) as keyed 64-bit fingerprints, never the values, and
:meth:`~TaintSet.find` tells whether a later text (a tool call's argument) carries one of them,
as is, base64 (standard or URL-safe, at any alignment), hex or percent-encoded.

How (the figures are the module's constants):

- Text is taken as its UTF-8 bytes. A tainted text is remembered as the fingerprints of its
  ``WINDOW``-byte windows at every ``STRIDE``-th offset (``WINDOW + STRIDE - 1 == MIN_RUN``), so
  any run of ``MIN_RUN`` bytes of it holds a remembered window, and :meth:`find` looks at the
  windows at every offset of the text it is given. A secret value of 8 to 15 bytes is one
  window of its own length; a longer one is windowed like a text (its first and last windows
  always kept).
- Each remembered window has two numbers: a 32-bit *pre* (an XOR fold of its bits, computed
  for every offset of a text at once with big-integer shifts, so the scan over a text is a few
  C-level passes) and the 64-bit *fingerprint*, the first 8 bytes of BLAKE2s over a 16-byte
  key derived from ``key`` and the window (stable across processes; never Python's ``hash``).
  :meth:`find` looks each offset's pre up in a dict and hashes only the windows whose pre is
  known, so a false match needs both to agree (about ``len(text) * len(self) / 2**96``).
- Low-information windows are never remembered, so indentation, padding and separators never
  taint: a window of a text none of whose 6 consecutive bytes are all different (so any with
  fewer than 6 distinct bytes), a secret value or window of one with fewer than 4.
- The set holds at most ``capacity`` fingerprints, the oldest (by first addition) dropped
  first; memory is at most about ``BYTES_PER_ENTRY`` bytes per fingerprint (:attr:`nbytes`),
  the :meth:`export` at most ``EXPORT_BYTES_PER_ENTRY`` per fingerprint plus the source labels.

Sans-IO; the standard library only.
"""

from __future__ import annotations

import array
import hashlib
import struct
import sys
from collections import Counter
from collections.abc import Iterator, KeysView
from itertools import compress
from typing import Final, NamedTuple

from assay.inspect import taint_bytes as tb
from assay.inspect.taint_ring import EXPORT_BYTES_PER_ENTRY, MAX_SOURCES, WINDOW, TaintRing
from assay.inspect.taint_ring import MIN_LEN as _MIN_LEN

__all__ = [
    "BYTES_PER_ENTRY",
    "EXPORT_BYTES_PER_ENTRY",
    "MAX_SOURCES",
    "MAX_SOURCE_CHARS",
    "MIN_RUN",
    "MIN_VALUE_CHARS",
    "STRIDE",
    "WINDOW",
    "Prepared",
    "Taint",
    "TaintSet",
]

MIN_RUN: Final = 24  # bytes: any run this long of a tainted text is found
STRIDE: Final = MIN_RUN - WINDOW + 1  # 9: windows of a text start every STRIDE bytes
MIN_VALUE_CHARS: Final = 8  # add_value ignores shorter values
MAX_SOURCE_CHARS: Final = 200  # a longer label is cut
BYTES_PER_ENTRY: Final = 160  # documented bound of nbytes per fingerprint (tests check it)
OTHER_SOURCES: Final = "(other sources)"

_VALUE_DISTINCT: Final = 4  # a value (or a window of one) with fewer distinct bytes is not
_CHUNK: Final = 4096  # pres looked up per isdisjoint call in find


class Prepared(NamedTuple):
    """Entries computed for a set but not added yet (:meth:`TaintSet.prepare_text`,
    :meth:`TaintSet.prepare_value`): pres, fingerprints and window length codes, in order."""

    pres: list[int]
    fps: list[int]
    lengths: list[int]


class Taint(NamedTuple):
    """What :meth:`TaintSet.find` found: where the tainted data came from, and how it was
    encoded in the text looked at."""

    source: str  # the "server/tool" label given when it was added
    encoding: str  # "plain" | "base64" | "hex" | "url"


class TaintSet(TaintRing):
    """A bounded set of fingerprints of tainted values and texts (module docstring)."""

    def __init__(self, capacity: int = 32768, key: bytes = b"") -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._key = hashlib.blake2s(bytes(key), person=b"assaytnt").digest()[:16]
        self._sbox = tb.sbox(self._key)
        # a ring of capacity slots (entry seq is in slot seq % capacity), oldest first
        self._fp = array.array("Q")  # fingerprint
        self._pres = tb.uint32s(b"")  # pre
        self._meta = array.array("H")  # (window length - 8) << 8 | source index
        self._next = 0  # the seq of the next entry
        self._index: dict[int, int] = {}  # pre -> the oldest live seq with that pre
        self._extra: dict[int, list[int]] = {}  # pre -> the newer ones (rare: collisions)
        self._lens = [0] * (WINDOW - _MIN_LEN + 1)  # live entries per window length
        self._sources: list[str] = []
        self._source_ids: dict[str, int] = {}
        self._source_refs: list[int] = []

    # ---- adding -------------------------------------------------------------------------

    def _fingerprint(self, window: bytes) -> int:
        return int.from_bytes(tb.digest8(self._key + window), "little")

    def _source(self, label: str, reserved: set[int] | frozenset[int] = frozenset()) -> int:
        """The index of a source label (a new one takes the place of a label no live entry
        points at once the table is full; past MAX_SOURCES, the shared last label)."""
        label = label[:MAX_SOURCE_CHARS]
        found = self._source_ids.get(label)
        if found is not None:
            return found
        if len(self._sources) < MAX_SOURCES - 1:
            self._sources.append(label)
            self._source_refs.append(0)
            self._source_ids[label] = len(self._sources) - 1
            return len(self._sources) - 1
        for index, refs in enumerate(self._source_refs[: MAX_SOURCES - 1]):
            if refs == 0 and index not in reserved:
                del self._source_ids[self._sources[index]]
                self._sources[index] = label
                self._source_ids[label] = index
                return index
        if len(self._sources) == MAX_SOURCES - 1:
            self._sources.append(OTHER_SOURCES)
            self._source_refs.append(0)
        return MAX_SOURCES - 1

    def _seqs(self, pre: int) -> list[int]:
        first = self._index.get(pre)
        if first is None:
            return []
        return [first, *self._extra.get(pre, ())]

    def _held(self, pre: int, fp: int, meta: int, since: int) -> bool:
        """An entry with this pre, fingerprint and length, of seq ``since`` or newer, is held."""
        for seq in self._seqs(pre):
            slot = seq % self.capacity
            if seq >= since and self._fp[slot] == fp and self._meta[slot] >> 8 == meta >> 8:
                return True
        return False

    def _insert(self, pres: list[int], fps: list[int], metas: list[int]) -> int:
        """Entries in order, but those held already (their age stays that of their first
        addition); the oldest are dropped past the capacity. Returns the number added."""
        capacity, index = self.capacity, self._index
        if len(pres) > capacity:
            pres, fps, metas = pres[-capacity:], fps[-capacity:], metas[-capacity:]
        count = len(pres)
        clash = index.keys() & pres
        if clash or len(set(pres)) != count:  # some may be held: keep the new ones
            since = self._next + count - capacity  # entries this old may go in this batch
            seen: set[tuple[int, int, int]] = set()
            keep = []
            for i, (pre, fp, meta) in enumerate(zip(pres, fps, metas)):
                ident = (pre, fp, meta >> 8)
                if ident in seen or (pre in clash and self._held(pre, fp, meta, since)):
                    continue
                seen.add(ident)
                keep.append(i)
            pres, fps, metas = [pres[i] for i in keep], [fps[i] for i in keep], [metas[i] for i in keep]
            count = len(pres)
        if not count:
            return 0
        self._evict(max(0, len(self) + count - capacity))
        first = self._next
        for part, values in ((self._fp, fps), (self._pres, pres), (self._meta, metas)):
            tb.ring_write(part, first % capacity, values, capacity)
        self._next = first + count
        seqs = range(first, first + count)
        clash = index.keys() & pres
        if clash or len(set(pres)) != count:
            extra = self._extra
            for pre, seq in zip(pres, seqs):
                if pre in index:
                    extra.setdefault(pre, []).append(seq)
                else:
                    index[pre] = seq
        else:
            index.update(zip(pres, seqs))
        self._count(metas, 1)
        return count

    def _evict(self, count: int) -> None:
        """Drop the ``count`` oldest entries."""
        if count <= 0:
            return
        first = self._next - len(self)
        slots = [seq % self.capacity for seq in range(first, first + count)]
        pres = [self._pres[slot] for slot in slots]
        index, extra = self._index, self._extra
        if extra.keys().isdisjoint(pres):
            for pre in pres:
                del index[pre]
        else:
            for pre in pres:  # the oldest seq of a pre is the one in index
                newer = extra.get(pre)
                if newer:
                    index[pre] = newer.pop(0)
                    if not newer:
                        del extra[pre]
                else:
                    del index[pre]
        self._count([self._meta[slot] for slot in slots], -1)
        # the slots are overwritten by the entries that take their place

    def _count(self, metas: list[int], sign: int) -> None:
        for meta, n in Counter(metas).items():
            self._lens[meta >> 8] += sign * n
            self._source_refs[meta & 0xFF] += sign * n

    def _windows(self, data: bytes, starts: list[int]) -> Prepared:
        """The entries of the windows of ``data`` at ``starts`` (ascending, lively ones only)."""
        if not starts:
            return Prepared([], [], [])
        first = starts[0]
        folded = tb.fold(data[first : starts[-1] + WINDOW], WINDOW, self._sbox)
        windows = [data[start : start + WINDOW] for start in starts]
        pres = tb.uint32s(b"".join([folded[s - first : s - first + 4] for s in starts])).tolist()
        fps = array.array("Q", b"".join(map(tb.digest, map(tb.blake2s8, map(self._key.__add__, windows)))))
        if not tb.LITTLE:  # pragma: no cover
            fps.byteswap()
        return Prepared(pres, fps.tolist(), [WINDOW - _MIN_LEN] * len(pres))

    def prepare_text(self, text: str, limit: int | None = None) -> Prepared:
        """The entries :meth:`add_text` adds for ``text`` (its newest ``limit`` windows, at most
        the capacity), computed without changing the set: :meth:`add_prepared` adds them (to
        this set or to any set made under the same key)."""
        data = text.encode("utf-8", "surrogatepass")
        if len(data) < MIN_RUN:
            return Prepared([], [], [])
        cap = self.capacity if limit is None else min(limit, self.capacity)
        starts = range(0, len(data) - WINDOW + 1, STRIDE)
        chosen: list[int] = []
        end, chunk = len(starts), cap + cap // 4 + 64
        while end > 0 and len(chosen) < cap:  # the newest windows first
            begin = max(0, end - chunk)
            region = data[starts[begin] : starts[end - 1] + WINDOW]
            chosen[:0] = compress(starts[begin:end], tb.lively(region)[::STRIDE])
            end, chunk = begin, chunk * 2
        return self._windows(data, chosen[-cap:] if cap else [])

    def prepare_value(self, value: str) -> Prepared:
        """The entries :meth:`add_value` adds for ``value``, computed without changing the set."""
        if len(value) < MIN_VALUE_CHARS:
            return Prepared([], [], [])
        data = value.encode("utf-8", "surrogatepass")
        if len(data) <= WINDOW:
            if len(set(data)) < _VALUE_DISTINCT:
                return Prepared([], [], [])
            pre = int.from_bytes(tb.fold(data, len(data), self._sbox)[:4], "little")
            return Prepared([pre], [self._fingerprint(data)], [len(data) - _MIN_LEN])
        starts = list(range(0, len(data) - WINDOW + 1, STRIDE))
        if starts[-1] != len(data) - WINDOW:
            starts.append(len(data) - WINDOW)
        starts = [s for s in starts if len(set(data[s : s + WINDOW])) >= _VALUE_DISTINCT]
        return self._windows(data, starts)

    def add_prepared(self, prepared: Prepared, source: str) -> int:
        """Remember entries :meth:`prepare_text` or :meth:`prepare_value` computed (under this
        set's key), from ``source``. Returns the fingerprints added."""
        if not prepared.pres:
            return 0
        index = self._source(source)
        return self._insert(prepared.pres, prepared.fps, [code << 8 | index for code in prepared.lengths])

    def add_text(self, text: str, source: str) -> int:
        """Remember a tainted text: every run of ``MIN_RUN`` bytes of it (but low-information
        ones) is found by :meth:`find` from now on. Returns the fingerprints added."""
        return self.add_prepared(self.prepare_text(text), source)

    def add_value(self, value: str, source: str) -> int:
        """Remember a secret value (of at least ``MIN_VALUE_CHARS`` characters): the whole value
        is found by :meth:`find`, and so is any run of ``MIN_RUN`` bytes of a longer one.
        Returns the fingerprints added."""
        return self.add_prepared(self.prepare_value(value), source)

    # ---- finding ------------------------------------------------------------------------

    def find(self, text: str) -> Taint | None:
        """The first tainted value or run that ``text`` carries, as is, then percent-decoded,
        then in a base64 or hex run (of the text or of its percent-decoding); else None."""
        if not self._index:
            return None
        data = text.encode("utf-8", "surrogatepass")
        hit = self._scan(data)
        if hit is not None:
            return Taint(hit, "plain")
        views = [data]
        if b"%" in data:
            decoded = [tb.percent_decode(data)]
            if b"+" in data:
                decoded.append(tb.percent_decode(data.replace(b"+", b" ")))
            hit = self._scan(b"\n".join(decoded))
            if hit is not None:
                return Taint(hit, "url")
            views += decoded
        for encoding, decode in (("base64", tb.base64_views), ("hex", tb.hex_views)):
            pieces = [piece for view in views for piece in decode(view)]
            hit = self._scan(b"".join(pieces)) if pieces else None
            if hit is not None:
                return Taint(hit, encoding)
        return None

    def _scan(self, data: bytes) -> str | None:
        """The source of the earliest remembered window in ``data``, or None."""
        keys = self._index.keys()
        best: tuple[int, str] | None = None
        checked: dict[bytes, str | None] = {}  # a window repeated in data is hashed once
        for length in range(_MIN_LEN, WINDOW + 1):
            last = len(data) - length  # the last offset a window of this length starts at
            if not self._lens[length - _MIN_LEN] or last < 0:
                continue
            folded = tb.fold(data, length, self._sbox)
            for align in range(min(4, last + 1)):
                count = (last - align) // 4 + 1
                pres = tb.uint32s(folded[align : align + 4 * count])
                for offset in self._candidates(pres, keys):
                    offset = align + 4 * offset
                    if best is not None and offset >= best[0]:
                        break
                    window = data[offset : offset + length]
                    if window in checked:
                        source = checked[window]
                    else:
                        source = checked[window] = self._confirm(window, folded, offset)
                    if source is not None:
                        best = (offset, source)
        return None if best is None else best[1]

    @staticmethod
    def _candidates(pres: array.array[int], keys: KeysView[int]) -> Iterator[int]:
        """The positions (ascending) in ``pres`` of a held pre: a C-level ``isdisjoint`` per
        chunk, a Python pass over a chunk only where one is (a chance of about 2**-17 per
        position for a full set, more where the argument repeats a held window)."""
        for begin in range(0, len(pres), _CHUNK):
            part = pres[begin : begin + _CHUNK]
            if not keys.isdisjoint(part):
                yield from (begin + j for j, pre in enumerate(part.tolist()) if pre in keys)

    def _confirm(self, window: bytes, folded: bytes, offset: int) -> str | None:
        pre = int.from_bytes(folded[offset : offset + 4], "little")
        fp: int | None = None
        for seq in self._seqs(pre):
            slot = seq % self.capacity
            meta = self._meta[slot]
            if (meta >> 8) + _MIN_LEN != len(window):
                continue
            if fp is None:
                fp = self._fingerprint(window)
            if self._fp[slot] == fp:
                return self._sources[meta & 0xFF]
        return None

    # ---- size, restore (export and merge: TaintRing) ---------------------------------------

    def __len__(self) -> int:
        return min(self._next, self.capacity)

    @property
    def nbytes(self) -> int:
        """Memory held (CPython object sizes): at most ``BYTES_PER_ENTRY * capacity`` plus the
        source labels (at most ``MAX_SOURCES`` of ``MAX_SOURCE_CHARS`` characters)."""
        size = sum(
            sys.getsizeof(part) for part in (self._fp, self._pres, self._meta, self._index, self._extra, self._lens)
        )
        size += sum(sys.getsizeof(pre) + sys.getsizeof(seq) for pre, seq in self._index.items())
        size += sum(sys.getsizeof(pre) + sys.getsizeof(seqs) + 32 * len(seqs) for pre, seqs in self._extra.items())
        size += sum(sys.getsizeof(label) + 8 for label in self._sources)
        return size + sys.getsizeof(self._source_ids) + sys.getsizeof(self._source_refs)

    @classmethod
    def restore(cls, data: bytes, capacity: int = 32768, key: bytes = b"") -> TaintSet:
        """The set :meth:`export` wrote (its newest ``capacity`` entries). Raises ValueError,
        and nothing else, on anything else (or on an export made under another key)."""
        new = cls(capacity, key)
        try:
            new._load(bytes(data))
        except (struct.error, IndexError, UnicodeDecodeError, OverflowError) as exc:
            raise ValueError(f"not a taint set export: {exc}") from None
        return new
