"""Where a credential comes from: a file or a variable, read when it is needed (the shell;
docs/auth.md, "Machine to machine").

A record names the source (the file's path, the variable's name), never the value: wrap reads
it again, from its own environment, each time it needs a new token. A file is read without
blocking (a FIFO is refused), capped, and must be a regular file; every error is a ValueError
whose text is one line naming the source, never its content.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import Any

from assay.auth.clientauth import Signer, load_key

__all__ = ["CAP", "read_key", "read_source", "read_value"]

CAP = 64 * 1024


def read_value(*, path: str | None, variable: str | None, environ: Mapping[str, str], what: str) -> str:
    """The text of the file ``path`` or of the variable ``variable`` (exactly one given)."""
    if variable:
        value = environ.get(variable, "")
        if not value.strip():
            raise ValueError(f"the variable {variable} ({what}) is not set")
        return value.strip()
    if not path:
        raise ValueError(f"no {what} given")
    data = _read_file(path)
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValueError(f"{path} ({what}) is not UTF-8 text") from None
    if not text:
        raise ValueError(f"{path} ({what}) is empty")
    return text


def _read_file(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        data = os.read(fd, CAP + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > CAP:
        raise ValueError(f"{path} is larger than {CAP} bytes")
    return data


def read_source(grant: Mapping[str, Any], prefix: str, environ: Mapping[str, str], what: str) -> str:
    """The value a grant names with ``<prefix>_file`` or ``<prefix>_env``."""
    return read_value(path=grant.get(f"{prefix}_file"), variable=grant.get(f"{prefix}_env"), environ=environ, what=what)


def read_key(path: str) -> Signer:
    """The private key in the PEM file ``path``."""
    data = _read_file(path)
    try:
        return load_key(data)
    except ValueError as exc:
        raise ValueError(f"{path} {exc}") from None
