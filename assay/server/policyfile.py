"""The policy-path jail and the bounded policy read (spec/server.md §4.1, §4.2).

Every policy tool goes through :func:`read_policy`; nothing else opens a caller-named file.
Messages never contain the root or any absolute path (R6), only fixed texts, OS strerror text
(DECISIONS D29) and, for a missing file, the path exactly as the caller gave it (B2).
"""

from __future__ import annotations

import os

from assay.server.errors import ToolError

__all__ = ["resolve_policy_path", "read_bounded", "read_policy", "LIMIT_MESSAGE"]

LIMIT_MESSAGE = "policy file exceeds the configured byte limit"


def _os_text(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def resolve_policy_path(root: str, p: str) -> tuple[str, bool]:
    """Return (path to read, exists). ``root`` is already canonical (C6)."""
    if not p.strip():
        raise ToolError("E_INVALID_REQUEST", "policy path is empty")
    if os.path.isabs(p) or p.startswith("\\"):
        raise ToolError("E_PERMISSION_DENIED", "absolute paths are not allowed")
    parts: list[str] = []
    for segment in p.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not parts:
                raise ToolError("E_PERMISSION_DENIED", "path escapes policy_root")
            parts.pop()
        else:
            parts.append(segment)
    if "\x00" in p:
        raise ToolError("E_POLICY_READ", "embedded null byte")
    walked = os.path.join(root, *parts)
    if not os.path.exists(walked):
        return walked, False  # R5: dangling symlinks land here too
    try:
        canonical = os.path.realpath(walked, strict=True)
    except OSError as exc:
        raise ToolError("E_POLICY_READ", f"canonicalize failed: {_os_text(exc)}") from None
    if canonical != root and os.path.commonpath([root, canonical]) != root:
        raise ToolError("E_PERMISSION_DENIED", "policy resolves outside policy_root")
    return canonical, True


def read_bounded(path: str, limit: int) -> bytes:
    """Read at most ``limit + 1`` bytes, never trusting file metadata (B1)."""
    with open(path, "rb") as handle:
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0:
            chunk = handle.read(min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise ToolError("E_LIMIT_EXCEEDED", LIMIT_MESSAGE)
    return data


def read_policy(root: str, p: str, limit: int) -> tuple[str, bytes]:
    """Jail, then bounded read. Returns (resolved path, bytes) or raises :class:`ToolError`."""
    path, _exists = resolve_policy_path(root, p)
    try:
        return path, read_bounded(path, limit)
    except FileNotFoundError:
        raise ToolError("E_POLICY_NOT_FOUND", f"Policy not found: {p}") from None
    except NotADirectoryError as exc:
        # `file.yaml/x`: a path through a regular file does not exist either.
        raise ToolError("E_POLICY_READ", _os_text(exc)) from None
    except OSError as exc:
        raise ToolError("E_POLICY_READ", _os_text(exc)) from None
