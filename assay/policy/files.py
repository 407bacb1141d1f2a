"""The one way a policy *file* becomes a :class:`~assay.policy.model.Policy` (docs/policy.md,
"Loading" and "File ceilings").

Every command that takes a policy file (``assay mcp wrap``, ``discover``, ``protect``) calls
:func:`load_policy_file`; the server, which opens the file itself beneath its policy root
(docs/server.md, "Policy path jail"), hands the open descriptor to :func:`read_policy_fd` and the
bytes to :func:`~assay.policy.loader.load_policy` with the same ceiling. So for every path:

- the file is read by :mod:`assay.inputs` (regular files only, opened without blocking, so a
  FIFO or ``/dev/zero`` is refused at once; never more than the ceiling plus one byte);
- the ceiling is ``ASSAY_MCP_MAX_POLICY_BYTES`` (:func:`assay.inputs.policy_byte_limit`) unless
  the caller passes one, and the YAML expansion budget is derived from that same ceiling
  (:func:`assay.policy.yamlio.expansion_budget`);
- a file that cannot be read is one :class:`PolicyFileError` line,
  ``cannot read policy <path>: <reason>``; a file that does not load is one
  :class:`~assay.policy.errors.PolicyError` line.

This is the only module of :mod:`assay.policy` that touches the file system (through
:mod:`assay.inputs`); everything it hands on is bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from assay.inputs import InputFileError, policy_byte_limit, read_fd, read_input_file
from assay.policy.model import Policy

__all__ = [
    "DocumentCache",
    "PolicyFileError",
    "policy_ceiling",
    "read_policy_file",
    "read_policy_fd",
    "load_policy_file",
    "user_home",
]


class DocumentCache(Protocol):
    """Where :func:`load_policy_file` may find the parsed YAML document of a policy file's bytes
    instead of parsing them (wrap's: :mod:`assay.wrap.policycache`). Only the parse is skipped:
    the document is converted, checked and warned about as a parsed one is, so a hit loads the
    same policy, with the same warnings and errors, as a miss."""

    def lookup(self, data: bytes, ceiling: int) -> dict[str, Any] | None:
        """The document parsed from ``data`` under ``ceiling``, or None (a miss)."""

    def snapshot(self, doc: Any) -> object | None:
        """What :meth:`store` keeps of a just-parsed document, taken before it is converted;
        None when it cannot be kept."""

    def store(self, data: bytes, ceiling: int, snapshot: object) -> None:
        """Keep a snapshot of a document that loaded (never raises)."""


class PolicyFileError(InputFileError):
    """A policy file that cannot be read: ``str(e)`` is ``cannot read policy <path>: <reason>``
    (one line, what every command prints). An :class:`~assay.inputs.InputFileError` (so an
    ``OSError``); ``strerror``/``reason`` is the short reason, ``too_large`` says the ceiling
    refused it."""

    @classmethod
    def of(cls, exc: InputFileError) -> PolicyFileError:
        return cls("policy", exc.path, exc.reason, exc.errno or 0, too_large=exc.too_large)

    def __str__(self) -> str:
        return f"cannot read policy {self.path}: {self.reason}"


def policy_ceiling(limit: int | None = None) -> int:
    """The byte ceiling of a policy read: ``limit`` when given, else ``ASSAY_MCP_MAX_POLICY_BYTES``
    (default 1,000,000). The expansion budget of the YAML is derived from the same number."""
    return policy_byte_limit() if limit is None else limit


def read_policy_file(path: str, *, limit: int | None = None) -> bytes:
    """The bytes of the policy file ``path``: a regular file of at most ``limit`` bytes
    (:func:`policy_ceiling`). Raises :class:`PolicyFileError`."""
    try:
        return read_input_file(path, limit=policy_ceiling(limit), what="policy")
    except InputFileError as exc:
        raise PolicyFileError.of(exc) from None


def read_policy_fd(fd: int, *, limit: int, source: str = "policy") -> bytes:
    """The bytes of a policy file someone else opened (and checked is a regular file): at most
    ``limit`` of them, whatever the file claims. Raises :class:`PolicyFileError`; the caller
    closes ``fd``."""
    try:
        return read_fd(fd, limit=limit, what="policy", path=source)
    except InputFileError as exc:
        raise PolicyFileError.of(exc) from None


def load_policy_file(
    path: str,
    *,
    strict_deprecations: bool = False,
    warn: Callable[[str], object] | None = None,
    limit: int | None = None,
    on_read: Callable[[str], object] | None = None,
    cache: DocumentCache | None = None,
) -> Policy:
    """:func:`read_policy_file` then :func:`~assay.policy.loader.load_policy` under the same
    ceiling (``limit``, default ``ASSAY_MCP_MAX_POLICY_BYTES``); raises :class:`PolicyFileError`
    or :class:`~assay.policy.errors.PolicyError`, each one line naming ``path``.

    ``on_read(path)`` is called once the bytes are read, before they are parsed (wrap prints
    its ``[assay] loading policy from <path>`` line there: docs/wrap.md, "Startup").
    ``strict_deprecations`` and ``warn`` are :func:`~assay.policy.loader.load_policy`'s.
    ``cache``: where the parsed document of these bytes may already be (then YAML is neither
    imported nor parsed), and where a document that loaded is kept (:class:`DocumentCache`).
    """
    from assay.policy.loader import parse_policy_bytes, policy_from_document

    ceiling = policy_ceiling(limit)
    data = read_policy_file(path, limit=ceiling)
    if on_read is not None:
        on_read(path)
    doc = None if cache is None else cache.lookup(data, ceiling)
    snapshot = None
    if doc is None:
        doc = parse_policy_bytes(data, source=path, byte_ceiling=ceiling)
        snapshot = None if cache is None else cache.snapshot(doc)
    policy = policy_from_document(
        doc, source=path, strict_deprecations=strict_deprecations, warn=warn, home=user_home()
    )
    if cache is not None and snapshot is not None:
        cache.store(data, ceiling, snapshot)
    return policy


def user_home() -> str | None:
    """The home directory of the user running this process, which ``~`` and ``$HOME`` in a
    policy's path rules stand for (docs/policy.md, "Path confinement"): ``$HOME`` when it is an
    absolute path, else the password database's entry for this user, else ``None``."""
    import os

    home = os.environ.get("HOME")
    if home and home.startswith("/"):
        return home
    try:
        import pwd

        entry = pwd.getpwuid(os.getuid()).pw_dir
    except (KeyError, OSError, ImportError):
        return None
    return entry if entry.startswith("/") else None
