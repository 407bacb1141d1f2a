"""Id and time sources of the records (docs/wrap-records.md, "Decision event" and "How records
are built"): decision event ids and RFC 3339 UTC times.

The sans-IO parts of wrap never call these themselves unless no source was injected: a
:class:`assay.session.records.Recorder` takes ``new_event_id`` and ``now``, and tests replace them.
"""

from __future__ import annotations

import os
import time as _time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Final

__all__ = ["batched_event_ids", "cached_clock", "new_event_id", "rfc3339_utc", "stamp"]


def rfc3339_utc(moment: datetime | None = None) -> str:
    """RFC 3339 UTC with a ``+00:00`` offset and 6 fractional digits (docs/wrap-records.md).

    A naive ``moment`` is taken to be UTC already; an aware one is converted.
    """
    if moment is None:
        moment = datetime.now(timezone.utc)
    elif moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    else:
        moment = moment.astimezone(timezone.utc)
    return moment.isoformat(timespec="microseconds")


def stamp(value: datetime | str | None) -> str:
    """A record time: a string is used verbatim, a datetime (or now) as :func:`rfc3339_utc`."""
    return value if isinstance(value, str) else rfc3339_utc(value)


def cached_clock() -> Callable[[], str]:
    """``rfc3339_utc()`` of now, cheaper: the text up to the seconds is kept for the second it
    names, so a call formats only the microseconds."""
    time_ns, gmtime, strftime = _time.time_ns, _time.gmtime, _time.strftime
    second_now = -1
    prefix = ""

    def now() -> str:
        nonlocal second_now, prefix
        micro = time_ns() // 1000
        second = micro // 1_000_000
        if second != second_now:
            prefix = strftime("%Y-%m-%dT%H:%M:%S.", gmtime(second))
            second_now = second
        return "%s%06d+00:00" % (prefix, micro - second * 1_000_000)

    return now


_VARIANT: Final = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}
_ID_BATCH: Final = 256


def batched_event_ids() -> Callable[[], str]:
    """``evt_decision_<uuid4>`` ids from ``os.urandom``, read and formatted 256 at a time.

    Each id is a version-4 UUID as :func:`uuid.uuid4` makes it (16 random bytes, the version
    nibble set to 4 and the variant bits to ``10``), in its lowercase 8-4-4-4-12 form."""

    def ids() -> Iterator[str]:
        variant = _VARIANT
        while True:
            h = os.urandom(16 * _ID_BATCH).hex()
            yield from [
                f"evt_decision_{h[i : i + 8]}-{h[i + 8 : i + 12]}-4{h[i + 13 : i + 16]}-"
                f"{variant[h[i + 16]]}{h[i + 17 : i + 20]}-{h[i + 20 : i + 32]}"
                for i in range(0, 32 * _ID_BATCH, 32)
            ]

    return ids().__next__


def new_event_id() -> str:
    """A fresh decision event id, ``evt_decision_<uuid4>`` (docs/wrap-records.md, "Decision event")."""
    return f"evt_decision_{uuid.uuid4()}"
