"""The readings of a resource URI that ``resources.allow`` and ``resources.deny`` are matched
against (docs/policy.md, "Resources and prompts"): the resource a URI names, not only its
spelling.

A server may look a URI up as written, decode its ``%``-escapes, or parse it with a URL parser
that also folds case and removes dot segments. :func:`readings` gives each of them:

1. the URI as written;
2. the URI ``%``-decoded once, as written and after the URL standard's first steps (C0
   controls and spaces stripped from the ends, tabs and newlines removed);
3. the URI as the URL standard reads it, then decoded: the scheme in lower case; for ``http``,
   ``https``, ``ws``, ``wss`` and ``ftp`` the host in lower case and ``\\`` read as ``/``; ``.``
   and ``..`` segments (also spelled ``%2e``) removed from a path that starts with ``/``; a
   ``file:`` URI is the path :func:`~assay.policy.fileuri.read_file_uri` reads, normalized
   (``file:///a/b``);
4. (not for ``file:``) the decoded URI read as the URL standard reads it: a server that decodes
   first and resolves the path after reads ``/v1/..%2F..%2Fadmin`` as ``/admin``.

A deny that matches any reading refuses the URI; an allow must match every reading. A ``file:``
URI that servers read differently has no reading: :func:`readings` raises
:class:`~assay.policy.fileuri.FileUriRefused`.

Plain code over strings; no I/O.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from assay.policy.fileuri import is_file_uri, preprocess, read_file_uri
from assay.policy.paths import normalize_path

__all__ = ["readings", "standard_reading"]

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_SPECIAL = frozenset({"http:", "https:", "ws:", "wss:", "ftp:"})  # file: is read by fileuri
_SINGLE_DOT = frozenset({".", "%2e"})
_DOUBLE_DOT = frozenset({"..", ".%2e", "%2e.", "%2e%2e"})


def readings(uri: str) -> tuple[str, ...]:
    """``uri`` as written, decoded, and as the URL standard reads it (docs/policy.md, "Resources
    and prompts"), without repeats. Raises FileUriRefused for a ``file:`` URI with no one
    reading."""
    out = [uri]
    plain = preprocess(uri)
    decoded = unquote(plain, errors="replace")
    names = [unquote(uri, errors="replace"), decoded, standard_reading(uri)]
    if "%" in plain and not is_file_uri(uri):  # a file: URI that decoding first would change is refused
        names.append(_standard(decoded, decode=False))
    for name in names:
        if name not in out:
            out.append(name)
    return tuple(out)


def standard_reading(uri: str) -> str:
    """The URI as the URL standard reads it, ``%``-escapes decoded once (see the module's
    docstring). Raises FileUriRefused for a ``file:`` URI with no one reading."""
    if is_file_uri(uri):
        return "file://" + _file_path(uri)
    return _standard(preprocess(uri), decode=True)


def _standard(uri: str, *, decode: bool) -> str:
    scheme_match = _SCHEME.match(uri)
    if scheme_match is None:  # no scheme: nothing to fold
        return unquote(uri, errors="replace") if decode else uri
    scheme = scheme_match.group().lower()
    rest = uri[len(scheme) :]
    special = scheme in _SPECIAL
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    rest, tail = rest[:cut], rest[cut:]
    if special:
        rest = rest.replace("\\", "/")
    authority: str | None = None
    if special or rest.startswith("//"):
        rest = rest.lstrip("/") if special else rest[2:]  # a special scheme skips any number of slashes
        authority, slash, path = rest.partition("/")
        path = slash + path
        if special:
            userinfo, at, host = authority.rpartition("@")
            authority = userinfo + at + unquote(host, errors="replace").lower()
    else:
        path = rest
    if path.startswith("/"):
        if "." in path or "%" in path:  # else no dot segment to remove
            path = _without_dot_segments(path)
    elif special:
        path = "/" + path  # a special URL's path is never empty
    head = scheme if authority is None else scheme + "//" + authority
    return unquote(head + path + tail, errors="replace") if decode else head + path + tail


def _file_path(uri: str) -> str:
    path = read_file_uri(uri)
    normal = normalize_path(path)
    last = path.rsplit("/", 1)[-1]
    return normal + "/" if last in ("", ".") and normal != "/" else normal


def _without_dot_segments(path: str) -> str:
    """A path's ``.`` and ``..`` segments removed as the URL standard removes them (``%2e`` is a
    dot; ``..`` never climbs above the first ``/``; a path ending in a dot segment ends in ``/``)."""
    out: list[str] = []
    segments = path[1:].split("/")
    for index, segment in enumerate(segments):
        low = segment.lower()
        last = index == len(segments) - 1
        if low in _DOUBLE_DOT:
            if out:
                out.pop()
            if last:
                out.append("")
        elif low in _SINGLE_DOT:
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/" + "/".join(out)
