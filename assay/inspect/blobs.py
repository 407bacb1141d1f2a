"""Blobs read as text: the base64 ``blob`` of a resource's contents, decoded one way, judged
as text when it is text, and written back in one spelling every client decodes alike
(docs/inspect.md, "Blobs").

- :func:`decode`: the bytes of a base64 text, read leniently (white space, padding and any
  other character outside the alphabet skipped; the URL-safe ``-`` and ``_`` read as ``+`` and
  ``/``), and whether the text was already the canonical spelling of those bytes (standard
  alphabet, padded, nothing else). It never fails.
- :func:`text_of`: the text of the bytes when the blob is text-like: a ``text/*``, JSON or XML
  media type (its ``charset`` when Python knows it and the bytes decode with it, else UTF-8
  with undecodable bytes kept as lone surrogates, so the text gives the same bytes back), or,
  whatever the media type, bytes that are valid UTF-8. None for other bytes (an image).
- :func:`encode`: a text back to canonical base64, in the encoding it was read with.

Decoders disagree about odd base64 (Node stops at the first ``=``, Python's ``b64decode`` skips
it and reads on), so what a client reads from a blob that is not canonical is not what wrap
read: such a blob is rewritten canonically (the bytes wrap read), and every client then reads
them.

Sans-IO and stateless.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re

__all__ = ["UTF8", "decode", "encode", "is_text_type", "text_of"]

UTF8 = "utf-8"
_NOT_ALPHABET = re.compile(r"[^A-Za-z0-9+/]+")
_URL_SAFE = str.maketrans("-_", "+/")
_TEXT_SUBTYPES = frozenset({"json", "xml"})
# the charsets a text-like blob may declare that are read with their own codec (any other is
# read as UTF-8): those of the WHATWG Encoding Standard, what browsers and Node decode, that
# Python has (every one linear in time), and UTF-32
_CHARSETS = frozenset(
    {
        "utf-8",
        "utf-16",
        "utf-16-le",
        "utf-16-be",
        "utf-32",
        "utf-32-le",
        "utf-32-be",
        "ascii",
        "iso8859-1",
        "iso8859-2",
        "iso8859-3",
        "iso8859-4",
        "iso8859-5",
        "iso8859-6",
        "iso8859-7",
        "iso8859-8",
        "iso8859-9",
        "iso8859-10",
        "iso8859-13",
        "iso8859-14",
        "iso8859-15",
        "iso8859-16",
        "cp1250",
        "cp1251",
        "cp1252",
        "cp1253",
        "cp1254",
        "cp1255",
        "cp1256",
        "cp1257",
        "cp1258",
        "cp874",
        "koi8-r",
        "koi8-u",
        "mac-roman",
        "shift_jis",
        "euc_jp",
        "iso2022_jp",
        "gbk",
        "gb18030",
        "gb2312",
        "big5",
        "euc_kr",
    }
)


def decode(text: str) -> tuple[bytes, bool]:
    """The bytes ``text`` stands for, and whether ``text`` is their canonical base64."""
    if text.isascii():  # the usual blob: canonical, read strictly at C speed
        try:
            data = binascii.a2b_base64(text, strict_mode=True)
        except binascii.Error:
            pass
        else:
            if binascii.b2a_base64(data, newline=False).decode("ascii") == text:
                return data, True
    cleaned = _NOT_ALPHABET.sub("", text.translate(_URL_SAFE))
    if len(cleaned) % 4 == 1:  # one character alone carries no whole byte
        cleaned = cleaned[:-1]
    data = binascii.a2b_base64(cleaned + "=" * (-len(cleaned) % 4))
    return data, len(text) == (len(data) + 2) // 3 * 4 and base64.b64encode(data).decode("ascii") == text


def is_text_type(mime: str | None) -> bool:
    """Whether a media type names text: ``text/*``, ``application/json`` or ``.../xml`` and the
    ``+json`` and ``+xml`` suffixes (parameters and case ignored)."""
    if not mime:
        return False
    essence = mime.split(";", 1)[0].strip().lower()
    kind, _, sub = essence.partition("/")
    if kind == "text":
        return True
    return sub in _TEXT_SUBTYPES or sub.endswith(("+json", "+xml"))


def _charset(mime: str) -> str | None:
    for param in mime.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            try:
                codec = codecs.lookup(value.strip().strip('"').lower()).name
            except (LookupError, ValueError):
                return None
            return codec if codec in _CHARSETS else None
    return None


def text_of(data: bytes, mime: str | None) -> tuple[str, str] | None:
    """``(text, codec)`` of a text-like blob's bytes, or None when they are not text."""
    if is_text_type(mime):
        assert mime is not None
        codec = _charset(mime)
        if codec is not None and codec != UTF8:
            try:
                return data.decode(codec), codec
            except (UnicodeDecodeError, ValueError):
                pass
        return data.decode(UTF8, "surrogateescape"), UTF8
    try:
        return data.decode(UTF8), UTF8
    except UnicodeDecodeError:
        return None


def encode(text: str, codec: str) -> str:
    """``text`` in ``codec`` (UTF-8: lone surrogates back to the bytes they stood for), as
    canonical base64."""
    errors = "surrogateescape" if codec == UTF8 else "strict"
    try:
        data = text.encode(codec, errors)
    except UnicodeEncodeError:  # a replacement the codec cannot write (a marker in ASCII cannot fail)
        data = text.encode(UTF8, "surrogatepass")
    return base64.b64encode(data).decode("ascii")
