"""The head of a server line: the members that decide whether it is relayed (sans-IO).

:func:`read_head` reads a line's top-level ``id``, ``method``, ``result`` and ``error`` (the
last two left raw) with msgspec; the server side (:mod:`assay.session.server_side`) routes each
line by them and the verdicts (:mod:`assay.session.verdicts`) take the id a reply names. A leaf:
nothing of assay.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["Head", "read_head"]


class Head(msgspec.Struct):
    """The members of a server line that decide whether it is relayed."""

    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


read_head = msgspec.json.Decoder(Head).decode
