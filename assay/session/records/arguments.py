"""The arguments a decision record carries under ``--log-arguments`` (docs/wrap-records.md,
"Logged arguments"): ``params.arguments`` redacted (:mod:`assay.inspect.secrets`), then capped.

Sans-IO; only called when the option is on.
"""

from __future__ import annotations

from typing import Any, Final

from assay.inspect.secrets import redact_head
from assay.jsonwrite import dumps
from assay.wrap.options import DEFAULT_LOG_ARGUMENTS_MAX

__all__ = ["DEFAULT_MAX_BYTES", "logged_arguments", "is_cut"]

DEFAULT_MAX_BYTES: Final = DEFAULT_LOG_ARGUMENTS_MAX


def _size(value: Any) -> int | None:
    """Bytes of ``value`` as compact JSON in UTF-8 (a lone surrogate counted as 3), or None."""
    try:
        text = dumps(value)
    except (OverflowError, TypeError, ValueError, RecursionError):
        return None
    return len(text.encode("utf-8", "surrogatepass"))


def logged_arguments(arguments: Any, max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
    """``arguments`` as recorded: redacted, and when their compact JSON (after redaction) is
    longer than ``max_bytes`` bytes, ``{"_truncated": true, "bytes": N, "head": H}`` instead:
    ``N`` the size of the arguments as sent (compact JSON, UTF-8), ``H`` the first at most
    ``max_bytes`` bytes of the redacted JSON text, as a string cut at a character boundary.
    The work is bounded by ``max_bytes``, however large the arguments (one C-speed encoding
    measures ``N``)."""
    redacted, _findings, cut = redact_head(arguments, max_bytes)
    if not cut:
        size = _size(redacted)
        if size is not None and size <= max_bytes:
            return redacted
    try:
        text = dumps(redacted)
    except (OverflowError, TypeError, ValueError, RecursionError):
        text = ""
    head = text.encode("utf-8", "surrogatepass")[:max_bytes].decode("utf-8", "ignore")
    return {"_truncated": True, "bytes": _size(arguments), "head": head}


def is_cut(recorded: Any) -> bool:
    """Whether recorded arguments are the marker :func:`logged_arguments` writes for a cut."""
    return isinstance(recorded, dict) and recorded.get("_truncated") is True and "head" in recorded
