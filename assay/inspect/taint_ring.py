"""The ring of a :class:`~assay.inspect.taint.TaintSet` written out and read back, and two sets
merged (docs/inspect.md, "Value taint"): fingerprints, pres and source labels, never the values,
oldest first, at most ``EXPORT_BYTES_PER_ENTRY`` bytes per fingerprint plus the labels. The
shared session stores the export; another wrap restores it or merges it into its own set.

:class:`TaintRing` is the ring's state as the set keeps it and this format; the set itself
(:mod:`assay.inspect.taint`) adds and finds. Sans-IO; the standard library only."""

from __future__ import annotations

import array
import struct
from abc import ABC, abstractmethod
from collections import Counter
from typing import Final

from assay.inspect import taint_bytes as tb

__all__ = ["EXPORT_BYTES_PER_ENTRY", "MAX_SOURCES", "TaintRing"]

EXPORT_BYTES_PER_ENTRY: Final = 14  # fingerprint 8, pre 4, length and source 2
MAX_SOURCES: Final = 256  # source labels kept; the last one is shared by any further sources
WINDOW: Final = 16  # bytes of a remembered window of a text (the longest window)
MIN_LEN: Final = 8  # the window lengths are MIN_LEN..WINDOW
_MAGIC: Final = b"ATS\x01"
_HEAD: Final = struct.Struct("<4s8sH")  # magic, key check, number of sources


class TaintRing(ABC):
    """The ring of a taint set (a slot per entry, ``seq % capacity``, oldest first), its export
    and its merge."""

    capacity: int
    _key: bytes
    _fp: array.array[int]  # fingerprint
    _pres: array.array[int]  # pre
    _meta: array.array[int]  # (window length - 8) << 8 | source index
    _next: int  # the seq of the next entry
    _index: dict[int, int]  # pre -> the oldest live seq with that pre
    _lens: list[int]  # live entries per window length
    _sources: list[str]
    _source_refs: list[int]

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def _source(self, label: str, reserved: set[int] | frozenset[int] = frozenset()) -> int:
        """The index of ``label`` in the source table (added when new)."""

    @abstractmethod
    def _insert(self, pres: list[int], fps: list[int], metas: list[int]) -> int:
        """Entries added, oldest first; how many were new."""

    def _check(self) -> bytes:
        return tb.digest8(self._key + b"check")  # 21 bytes: no window hashes to it

    def _slots(self) -> list[int]:
        """The live slots, oldest first."""
        first = self._next - len(self)
        return [seq % self.capacity for seq in range(first, self._next)]

    def export(self) -> bytes:
        """Fingerprints, pres and source labels (never the values), oldest first: at most
        ``EXPORT_BYTES_PER_ENTRY * capacity`` bytes plus the labels and 18 bytes."""
        live = len(self)
        start = (self._next - live) % self.capacity  # the oldest slot: the ring in two slices
        fps = self._fp[start:] + self._fp[:start]
        pres = self._pres[start:] + self._pres[:start]
        metas = self._meta[start:] + self._meta[:start]
        slots = range(live)
        if not tb.LITTLE:  # pragma: no cover
            for part in (fps, pres, metas):
                part.byteswap()
        out = [_HEAD.pack(_MAGIC, self._check(), len(self._sources))]
        for label in self._sources:
            raw = label.encode("utf-8", "surrogatepass")
            out.append(struct.pack("<H", len(raw)) + raw)
        out.append(struct.pack("<I", len(slots)))
        out += [fps.tobytes(), pres.tobytes(), metas.tobytes()]
        return b"".join(out)

    def _load(self, data: bytes) -> None:
        magic, check, nsources = _HEAD.unpack_from(data, 0)
        if magic != _MAGIC:
            raise ValueError("not a taint set export")
        if check != self._check():
            raise ValueError("taint set exported under another key")
        if nsources > MAX_SOURCES:
            raise ValueError("too many sources")
        at = _HEAD.size
        labels = []
        for _ in range(nsources):
            (size,) = struct.unpack_from("<H", data, at)
            raw = data[at + 2 : at + 2 + size]
            if len(raw) != size:
                raise ValueError("cut source label")
            labels.append(raw.decode("utf-8", "surrogatepass"))
            at += 2 + size
        (count,) = struct.unpack_from("<I", data, at)
        at += 4
        if len(data) - at != count * EXPORT_BYTES_PER_ENTRY:
            raise ValueError("wrong length")
        fps = array.array("Q", data[at : at + 8 * count])
        pres = tb.uint32s(data[at + 8 * count : at + 12 * count])
        metas = array.array("H", data[at + 12 * count :])
        if not tb.LITTLE:  # pragma: no cover
            fps.byteswap()
            metas.byteswap()
        raw = metas.tobytes() if tb.LITTLE else array.array("H", data[at + 12 * count :]).tobytes()
        if count and (max(raw[1::2]) > WINDOW - MIN_LEN or max(raw[0::2]) >= nsources):
            raise ValueError("bad entry")
        if self._fast_load(fps, pres, metas, raw, labels):
            return
        self._add_entries(fps.tolist(), pres.tolist(), metas.tolist(), labels)

    def _fast_load(
        self, fps: array.array[int], pres: array.array[int], metas: array.array[int], raw: bytes, labels: list[str]
    ) -> bool:
        """An export into an empty set, as it is (the usual restore: the shared session's state
        read again after another wrap saved it): the rings taken whole, the index built in one
        C-level pass. False (nothing done) when the general path is needed: more entries than
        the capacity, a pre held twice, or labels beyond the table."""
        count = len(fps)
        if self._next or count > self.capacity or len(labels) > MAX_SOURCES - 1 or len(set(labels)) != len(labels):
            return False
        index = dict(zip(pres.tolist(), range(count)))
        if len(index) != count:
            return False
        self._fp, self._pres, self._meta = fps, pres, metas
        self._index = index
        self._next = count
        for label in labels:
            self._source(label)
        for length, n in Counter(raw[1::2]).items():
            self._lens[length] += n
        for source, n in Counter(raw[0::2]).items():
            self._source_refs[source] += n
        return True

    def _add_entries(self, fps: list[int], pres: list[int], metas: list[int], labels: list[str]) -> None:
        """Entries of another set (or an export) whose source labels are ``labels``."""
        fps, pres, metas = fps[-self.capacity :], pres[-self.capacity :], metas[-self.capacity :]
        mapping: dict[int, int] = {}
        for index in sorted({meta & 0xFF for meta in metas}):
            mapping[index] = self._source(labels[index], set(mapping.values()))
        self._insert(pres, fps, [meta & 0xFF00 | mapping[meta & 0xFF] for meta in metas])

    def merge(self, other: TaintRing) -> None:
        """Add the entries of ``other`` (made under the same key) this set does not hold,
        oldest first; the capacity is kept (the oldest entries go first)."""
        if other._key != self._key:
            raise ValueError("cannot merge taint sets made under different keys")
        slots = other._slots()
        self._add_entries(
            [other._fp[s] for s in slots],
            [other._pres[s] for s in slots],
            [other._meta[s] for s in slots],
            list(other._sources),
        )
