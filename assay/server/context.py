"""What a tool handler may use: the root descriptor, the configuration, the logger, the caches.

Handlers are plain blocking functions. A call whose policy is already parsed runs inline in the
serving loop; one that must read and parse a policy runs in a worker thread under the dispatch
deadline (docs/server.md, "Policy path jail"). Everything here is thread-safe.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from assay.server.cache import PolicyCache
from assay.server.config import ServerConfig
from assay.server.errors import ToolError
from assay.server.log import Logger
from assay.server.policyfile import RootDir, normalize_policy_path, open_policy, read_open

__all__ = ["ToolContext", "NeedsWorker", "CACHE_NAMES", "field_limit", "require_str", "arguments_object"]

CACHE_NAMES = ("mcp", "blocklist", "sequence", "v11")
# A file changed less than this long before it was read may change again within the same
# filesystem timestamp tick; its size and times are then not trusted alone (its bytes are).
_RACY_NS = 1_000_000_000


class NeedsWorker(Exception):
    """Raised on the inline path when the call would parse a policy: run it in a worker."""


@dataclass
class _Memo:
    """What one read of a policy file showed: its identity and times, and its content digest."""

    signature: tuple[int, int, int, int, int]
    key: str
    trusted: bool  # the signature alone vouches for the content (not changed just before the read)


@dataclass
class ToolContext:
    root: str
    config: ServerConfig
    logger: Logger
    caches: dict[str, PolicyCache] = field(default_factory=dict)
    inline: bool = False  # this view is used by calls running inline in the serving loop
    rootdir: RootDir | None = None
    memo: dict[str, _Memo] = field(default_factory=dict)
    memo_lock: threading.Lock = field(default_factory=threading.Lock)
    # policy argument -> (its normalised components, joined): a pure function of the string
    paths: dict[str, tuple[list[str], str]] = field(default_factory=dict)
    racy_ns: int = _RACY_NS

    def __post_init__(self) -> None:
        for name in CACHE_NAMES:
            self.caches.setdefault(name, PolicyCache(name, self.config.cache_entries, self.logger))
        if self.rootdir is None:
            self.rootdir = RootDir(self.root)

    def inline_view(self) -> ToolContext:
        """The same root, caches and memo, for handlers that may not parse."""
        return replace(self, inline=True)

    def slow_hook(self, policy: str) -> None:
        """Test-only (docs/server.md, "Environment"): sleep when ASSAY_MCP_TEST_SLOW_MS is set
        and `policy` says slow (always in a worker, so the deadline can cut it short)."""
        if self.config.test_slow_ms is not None and "slow" in policy:
            if self.inline:
                raise NeedsWorker()
            time.sleep(self.config.test_slow_ms / 1000)

    def load(self, policy: str, cache: str, parse: Callable[[bytes], Any]) -> Any:
        """Jail, open, and the parsed policy: from the cache when the file is unchanged, else
        read under the byte ceiling and parsed (the one routine every policy tool uses).

        The file is looked up on every call (an edit, a removal or a swap is seen at once); its
        bytes are read again only when its device, inode, size, mtime or ctime differ from the
        last read, or when that read came within a second of the file's last change. A policy
        named by one component whose entry in the root is that same regular file (same device,
        inode, size and times: a change of content, mode or owner changes its ctime) is answered
        from the cache after one ``fstatat`` without following links, instead of open + fstat.
        """
        self.slow_hook(policy)
        known = self.paths.get(policy)
        if known is None:
            parts = normalize_policy_path(policy)  # a ToolError for the refused paths, never kept
            known = (parts, "/".join(parts))
            if len(self.paths) >= 1024:
                self.paths.clear()
            self.paths[policy] = known
        parts, name = known
        rootdir = self.rootdir
        if rootdir is None:  # __post_init__ sets it; only a caller that cleared it gets here
            rootdir = self.rootdir = RootDir(self.root)
        store = self.caches[cache]
        memo = self.memo.get(name)
        if memo is not None and memo.trusted and len(parts) == 1:
            st = rootdir.stat_entry(name)
            if st is not None and memo.signature == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns):
                found = store.lookup(memo.key)
                if found is not None:
                    return found[0]
        fd, st = open_policy(rootdir, policy, parts)
        try:
            signature = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if memo is not None and memo.trusted and memo.signature == signature:
                found = store.lookup(memo.key)
                if found is not None:
                    return found[0]
            # A bounded read of a regular file: cheap enough inline; parsing is not.
            started = time.time_ns()
            data = read_open(fd, self.config.max_policy_bytes)
        finally:
            os.close(fd)
        key = f"{name}:{hashlib.sha256(data).hexdigest()}"
        newest = max(st.st_mtime_ns, st.st_ctime_ns)
        with self.memo_lock:
            if len(self.memo) >= max(1024, 8 * self.config.cache_entries):
                self.memo.clear()
            self.memo[name] = _Memo(signature, key, trusted=newest < started - self.racy_ns)
        if self.inline:
            found = store.lookup(key)
            if found is None:
                raise NeedsWorker()
            return found[0]
        return store.get_or_parse(key, data, parse)


def _nbytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def field_limit(value: str, limit: int, message: str) -> None:
    """Inclusive byte limits, checked before any file access (docs/server.md, "Shared rules")."""
    if _nbytes(value) > limit:
        raise ToolError("E_LIMIT_EXCEEDED", message)


def arguments_object(arguments: Any) -> dict[str, Any]:
    """Non-object arguments are a dispatch failure (E_INTERNAL), never a tool-level error."""
    if not isinstance(arguments, dict):
        raise TypeError("arguments must be an object")
    return arguments


def require_str(arguments: dict[str, Any], key: str) -> str:
    value = arguments[key]  # KeyError -> E_INTERNAL
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string")
    return value
