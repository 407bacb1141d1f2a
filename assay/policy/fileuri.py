"""A ``file:`` URI read as the path a server opens (docs/policy.md, "file: URIs").

Servers read a ``file:`` URI with one of two families of parsers: the WHATWG URL standard
(Node's ``new URL`` and ``url.fileURLToPath``, browsers, most TypeScript servers) and RFC 3986
splitters (Python's ``urllib.parse.urlsplit``/``urlparse`` with ``unquote`` or
``url2pathname``). They agree on plain URIs and part ways on a handful of spellings: WHATWG reads
a backslash as ``/``, turns ``C|`` into ``C:``, removes ``..`` segments before the path reaches
the operating system, strips trailing spaces and refuses an encoded ``/``; Python keeps all of
them as written. :func:`read_file_uri` reads a URI the way both do (tabs and newlines removed,
the scheme's case ignored, an empty or ``localhost`` host, ``%``-escapes decoded as UTF-8) and
refuses every spelling on which they part ways, so the path it returns is the path either kind
of server opens (up to ``.`` segments and repeated slashes, which name the same file).

Plain code over strings; no I/O.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

__all__ = ["FileUriRefused", "is_file_uri", "preprocess", "read_file_uri"]

# What the URL standard strips from both ends of a URL (C0 controls and space) and removes from
# anywhere in it (tab, LF, CR); Python's urlsplit does the same, except that it keeps trailing ones.
C0_OR_SPACE = "".join(map(chr, range(0x21)))
_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ENCODED_SEPARATOR = re.compile(r"%(?:2[Ff]|5[Cc])")
_DRIVE_SEGMENT = re.compile(r"/[A-Za-z][:|](?=/|$)")
# the scheme as the URL standard reads it: ASCII letters in any case, C0 controls and spaces
# before it, tabs and newlines anywhere in it
_FILE_SCHEME = re.compile(r"[\x00-\x20]*[fF][\t\n\r]*[iI][\t\n\r]*[lL][\t\n\r]*[eE][\t\n\r]*:")


class FileUriRefused(ValueError):
    """A ``file:`` URI that names no path every parser agrees on; ``str(e)`` says why."""


def preprocess(text: str) -> str:
    """``text`` as a URL parser first sees it: C0 controls and spaces stripped from both ends,
    tabs and newlines removed from anywhere (the URL standard's first two steps)."""
    text = text.strip(C0_OR_SPACE)
    if "\t" in text or "\n" in text or "\r" in text:
        text = text.translate(_TAB_OR_NEWLINE)
    return text


def is_file_uri(text: str) -> bool:
    """Whether a URL parser reads ``text`` as a ``file:`` URL (``FILE:``, `` file:`` and
    ``fi<TAB>le:`` too): such a value is judged as the path it names, never as a file name."""
    return _FILE_SCHEME.match(text) is not None


def read_file_uri(text: str) -> str:
    """The absolute path the ``file:`` URI ``text`` names, ``%``-escapes decoded; ``.`` segments
    and repeated slashes are kept (the caller normalizes them).

    Raises :class:`FileUriRefused` for a URI the parsers read differently or that names no
    local absolute path (docs/policy.md, "file: URIs" lists each case).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise FileUriRefused("a lone surrogate (WHATWG parsers replace it, Python keeps it)") from None
    if text.strip(C0_OR_SPACE) != text:
        raise FileUriRefused("a space or control character at an end (WHATWG parsers strip it, Python keeps it)")
    uri = preprocess(text)
    if _FILE_SCHEME.match(uri) is None:
        raise FileUriRefused("not a file: URI")
    rest = uri[5:]
    if "\\" in rest:
        raise FileUriRefused("a backslash (WHATWG parsers read it as /, Python as part of a name)")
    if "?" in rest or "#" in rest:
        raise FileUriRefused("a file: URI with a query or fragment is not a path")
    if rest.startswith("//"):
        host, slash, tail = rest[2:].partition("/")
        if not (host == "" or (host.isascii() and host.lower() == "localhost")):
            raise FileUriRefused("a file: URI naming another host is not a local path")
        if not slash:
            raise FileUriRefused("a file: URI must name an absolute path")
        rest = "/" + tail
    if not rest.startswith("/"):
        raise FileUriRefused("a file: URI must name an absolute path")
    return _decoded(rest)


def _decoded(path: str) -> str:
    """The path decoded, or FileUriRefused where the parsers part ways on it. Whole-string
    checks: an encoded separator is refused first, so decoding never joins two segments."""
    if "%" in path:
        if _BAD_ESCAPE.search(path):
            raise FileUriRefused("a % not followed by two hex digits (Node refuses it, Python keeps it)")
        if _ENCODED_SEPARATOR.search(path):
            raise FileUriRefused("an encoded / or \\ (%2F, %5C: Node refuses it, Python decodes it)")
        try:
            path = unquote_to_bytes(path).decode("utf-8")
        except UnicodeDecodeError:
            raise FileUriRefused("invalid UTF-8 after %-decoding (Node refuses it, Python replaces it)") from None
    if "\x00" in path:
        raise FileUriRefused("embedded null byte")
    if "/../" in path or path.endswith("/.."):
        raise FileUriRefused(
            "a '..' segment (WHATWG parsers remove it from the text, the operating system follows it through symlinks)"
        )
    if _DRIVE_SEGMENT.search(path):
        raise FileUriRefused("a Windows drive letter (WHATWG parsers turn C| into C: and never remove it with '..')")
    return path
