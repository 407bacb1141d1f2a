"""What a JSON value holds: the strings of a tool result, a resource's contents or a tool
definition, looked at by the detectors, and the line rewritten where a string changed
(docs/inspect.md, "Where wrap looks").

- :func:`strings`: every string of a value with its RFC 6901 JSON Pointer, in document order
  (object members' names and values, array items; a name has its member's pointer), depth- and
  count-bounded.
- :func:`scan`: the findings of the detectors over those strings (:class:`Finding`: the check,
  the kind or rule, the pointer; never the text), and over the text of base64 blobs
  (:mod:`assay.inspect.blobs`; docs/inspect.md, "Blobs").
- :func:`splice`: the line with each string token whose text changed replaced, every other byte
  as it was: a masked result differs from the server's line only where a secret was.

Sans-IO and stateless.
"""

from __future__ import annotations

import base64
import json
from json.decoder import scanstring  # type: ignore[attr-defined]  # public in CPython, missing from typeshed
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from assay.inspect import injection, places, secrets
from assay.inspect.prefilter import Prefilter, encoded
from assay.inspect.secret_keys import ASSIGNED_KINDS, key_kind, member_secret
from assay.inspect.secrets import find_secrets
from assay.inspect.injection import find_injection, find_poison, strip_injection

__all__ = ["MAX_FINDINGS", "MAX_STRINGS", "NOTHING", "TOO_DEEP", "Finding", "Scan", "scan", "splice", "strings"]

MAX_DEPTH = 64  # a string nested deeper is not looked at: the scan says so (``depth_limit``)
MAX_STRINGS = 200_000  # strings looked at in one value; the rest make a ``too_many_strings`` finding
MAX_FINDINGS = 64  # findings kept per value (counted beyond)
_MIN_SECRET = 8  # no secret rule matches fewer characters
_MIN_VALUE = 6  # the shortest value a member that names a secret holds (secret_keys.assigned_value)


class Finding(NamedTuple):
    """One thing found: ``check`` is ``secrets``, ``injection`` or ``descriptions`` (or
    ``limits`` when a value was too deep or too large to look at whole); ``kind`` the secret
    kind or the injection kind; ``rule`` the rule id; ``pointer`` where (RFC 6901)."""

    check: str
    kind: str
    rule: str
    pointer: str

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "kind": self.kind, "rule": self.rule, "pointer": self.pointer}


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def strings(value: Any) -> Iterator[tuple[str, str]]:
    """``(pointer, text)`` of every string in ``value``, in document order. A container nested
    deeper than :data:`MAX_DEPTH` is not entered: it yields its pointer with :data:`TOO_DEEP`
    (an empty string that callers tell apart by identity) in place of its strings."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        pointer, item, depth = stack.pop()
        cls = item.__class__
        if cls is str:
            yield pointer, item
        elif cls is dict:
            if depth >= MAX_DEPTH:
                yield pointer, _TOO_DEEP
                continue
            for k, v in reversed(list(item.items())):
                at = f"{pointer}/{_escape(str(k))}"
                stack.append((at, v, depth + 1))
                if k.__class__ is str:  # a member's name is text that travels too
                    stack.append((at, k, depth + 1))
        elif cls is list:
            if depth >= MAX_DEPTH:
                yield pointer, _TOO_DEEP
                continue
            stack.extend((f"{pointer}/{i}", v, depth + 1) for i, v in reversed(list(enumerate(item))))


class _TooDeep(str):
    __slots__ = ()


_TOO_DEEP = _TooDeep("")
TOO_DEEP: str = _TOO_DEEP  # what strings() yields for a container it does not enter


class Scan(NamedTuple):
    """What :func:`scan` found: the findings (at most :data:`MAX_FINDINGS`), how many in all,
    the kinds of check that found something (``secrets``, ``injection``), the secret values
    found (for the value taint), and the new text of each string an action changed."""

    findings: list[Finding]
    total: int
    kinds: frozenset[str]
    values: list[str]
    changed: dict[str, str]


_NOTHING: Scan


def scan(
    value: Any,
    *,
    secrets_on: bool,
    injection_on: bool,
    mask: bool = False,
    strip: bool = False,
    poison: bool = False,
    user: Callable[[str], list[secrets.Secret]] | None = None,
    blobs: int = 0,
) -> Scan:
    """The findings in the strings of ``value``. ``secrets_on``: the secret rules (and
    ``user``'s, the policy's own: spans of a string); ``injection_on``: the injection rules
    (``poison``: also the rules for tool descriptions, the check is then ``descriptions``).
    ``mask`` and ``strip`` say what the changed strings become: each secret replaced by
    ``[REDACTED:<kind>]``, instructions stripped.

    ``blobs`` (bytes; 0: none) is how much base64 of ``blob`` members is decoded and looked at
    as text (:func:`_blobs`); a blob that is not in canonical base64 is in ``changed`` with its
    canonical spelling, whatever the actions (docs/inspect.md, "Blobs")."""
    finder = find_poison if poison else find_injection
    clean = False  # every string (not the text in blobs) seen at once, and nothing found
    if user is None:  # the usual answer: every string looked at in one pass per detector
        texts = _plain_strings(value)
        if texts is not None:
            clean = all(_nothing_in(group, secrets_on, injection_on, poison, finder) for group in _groups(texts))
            if clean and not (blobs and "blob" in texts) and not (secrets_on and _secret_members(value)):
                return _NOTHING
    look = _Look(secrets_on, injection_on, mask, strip, user, finder, "descriptions" if poison else "injection")
    count = 0
    for pointer, text in () if clean else strings(value):
        count += 1
        if text.__class__ is _TooDeep or count > MAX_STRINGS:
            look.limit("depth_limit" if count <= MAX_STRINGS else "too_many_strings", pointer)
            if count > MAX_STRINGS:
                break
            continue
        new = look.text(text, pointer)
        if new is not text:
            look.changed[text] = new
    if secrets_on:
        for pointer, kind, text in _secret_members(value):
            look.member(pointer, kind, text)
    if blobs:
        _blobs(value, look, blobs)
    return Scan(look.findings, look.total, frozenset(look.kinds), look.values, look.changed)


class _Look:
    """What :func:`scan` is looking for, and what it found so far."""

    __slots__ = (
        "secrets_on",
        "injection_on",
        "mask",
        "strip",
        "user",
        "finder",
        "check_name",
        "findings",
        "total",
        "kinds",
        "values",
        "changed",
    )

    def __init__(
        self,
        secrets_on: bool,
        injection_on: bool,
        mask: bool,
        strip: bool,
        user: Callable[[str], list[secrets.Secret]] | None,
        finder: Callable[[str], list[Any]],
        check_name: str,
    ) -> None:
        self.secrets_on = secrets_on
        self.injection_on = injection_on
        self.mask = mask
        self.strip = strip
        self.user = user
        self.finder = finder
        self.check_name = check_name
        self.findings: list[Finding] = []
        self.total = 0
        self.kinds: set[str] = set()
        self.values: list[str] = []
        self.changed: dict[str, str] = {}

    def found(self, finding: Finding) -> None:
        self.total += 1
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(finding)

    def limit(self, kind: str, pointer: str) -> None:
        self.kinds.add("limits")
        self.found(Finding("limits", kind, "limits", pointer))

    def member(self, pointer: str, kind: str, text: str) -> None:
        """A member whose name names a secret and whose string value is one
        (:func:`~assay.inspect.secret_keys.member_secret`): masked whole."""
        self.kinds.add("secrets")
        self.values.append(text)
        self.found(Finding("secrets", kind, kind, pointer))
        if self.mask:
            self.changed[text] = secrets.marker(kind)

    def text(self, text: str, pointer: str) -> str:
        """One string looked at: what it becomes (``text`` itself when nothing changed)."""
        new = text
        if self.secrets_on and len(text) >= _MIN_SECRET:
            found = find_secrets(text)
            if self.user is not None:
                extra = self.user(text)
                if extra:
                    found = _merged(found, extra)
            if found:
                self.kinds.add("secrets")
                for kind, start, end in found:
                    self.values.append(text[start:end])
                    self.found(Finding("secrets", kind, kind, pointer))
                if self.mask:
                    new = _masked(text, found)
        if self.injection_on:
            hits = self.finder(new)
            if hits:
                self.kinds.add(self.check_name)
                for hit in hits:
                    self.found(Finding(self.check_name, hit.kind, hit.rule, pointer))
                if self.strip:
                    new, _ = strip_injection(new)
        return new


def _blobs(value: Any, look: _Look, budget: int) -> None:
    """Each ``blob`` string of an object in ``value`` (a resource's contents, in a tool result
    or a ``resources/read`` answer), decoded and, when it is text, looked at as text; its
    pointer is the blob's. At most ``budget`` characters of base64 are decoded in all (the
    answer's own length keeps under it): past that, a ``blob_limit`` finding."""
    from assay.inspect import blobs

    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        pointer, item, depth = stack.pop()
        if depth >= MAX_DEPTH:
            continue  # not entered: strings() reported it (depth_limit)
        if item.__class__ is list:
            stack.extend((f"{pointer}/{i}", v, depth + 1) for i, v in reversed(list(enumerate(item))))
            continue
        if item.__class__ is not dict:
            continue
        for k, v in reversed(list(item.items())):
            if v.__class__ is dict or v.__class__ is list:
                stack.append((f"{pointer}/{_escape(str(k))}", v, depth + 1))
        blob = item.get("blob")
        if blob.__class__ is not str or not blob:
            continue
        at = f"{pointer}/blob"
        budget -= len(blob)
        if budget < 0:
            look.limit("blob_limit", at)
            return
        data, canonical = blobs.decode(blob)
        mime = item.get("mimeType")
        read = blobs.text_of(data, mime if mime.__class__ is str else None)
        if read is not None:
            text, codec = read
            new = look.text(text, at)
            if new is not text:
                look.changed[blob] = blobs.encode(new, codec)
                continue
        if not canonical:
            look.changed.setdefault(blob, base64.b64encode(data).decode("ascii"))


# between the strings of a value looked at together: a line break twice, which ends every rule's
# match (a secret's token, a phrase's line), so whatever is found in one string is found here
# (a match across two strings is then looked for string by string, where it is not)
_SEPARATOR = "\n\n"
_ALONE = 4096  # a string this long is looked at on its own (not copied into the others')


def _groups(texts: list[str]) -> list[str]:
    """The strings of a value as the texts the fast look reads: the short ones joined, each long
    one as it is (the same object: what the detectors keep about it serves the walk too)."""
    short = [text for text in texts if len(text) < _ALONE]
    groups = [text for text in texts if len(text) >= _ALONE]
    if short:
        groups.append(short[0] if len(short) == 1 else _SEPARATOR.join(short))
    return groups


def _nothing_in(
    text: str, secrets_on: bool, injection_on: bool, poison: bool, finder: Callable[[str], list[Any]]
) -> bool:
    """Whether neither detector finds anything in ``text``."""
    if secrets_on and injection_on and not poison and text.isascii() and _either().which(text) is None:
        return True  # the usual answer: one pass says neither detector can find anything
    if secrets_on and injection_on:  # where both detectors' literals are: one pass for both
        both = secrets.wanted(text) + injection.wanted(text, poison)  # (the set's pass first)
        places.SHARED.prime(text, encoded(text), both)
    return not (secrets_on and find_secrets(text)) and not (injection_on and finder(text))


_EITHER: list[Prefilter] = []


def _either() -> Prefilter:
    """One prefilter of the secret rules' and the injection rules' first looks together (for
    ASCII text, where both look at the text as it is)."""
    if not _EITHER:
        from assay.inspect.injection import GATE
        from assay.inspect.secret_rules import PREFILTER

        _EITHER.append(Prefilter([PREFILTER.alternatives + GATE.alternatives]))
    return _EITHER[0]


def _plain_strings(value: Any) -> list[str] | None:
    """The strings of ``value`` without their pointers (the fast look), or None when it is too
    deep or holds too many (then :func:`scan` looks string by string and reports the limit)."""
    out: list[str] = []
    stack: list[tuple[Any, int]] = [(value, 0)]
    pop, push, add = stack.pop, stack.append, out.append
    while stack:
        item, depth = pop()
        cls = item.__class__
        if cls is str:
            add(item)
        elif cls is dict or cls is list:
            if depth >= MAX_DEPTH:
                return None
            if cls is dict:
                for k, v in item.items():
                    if k.__class__ is str:
                        add(k)
                    if v.__class__ is str:
                        add(v)
                    elif v.__class__ is dict or v.__class__ is list:
                        push((v, depth + 1))
            else:
                for v in item:
                    if v.__class__ is str:
                        add(v)
                    elif v.__class__ is dict or v.__class__ is list:
                        push((v, depth + 1))
            if len(out) > MAX_STRINGS:
                return None
    return out or [""]


def _secret_members(value: Any) -> list[tuple[str, str, str]]:
    """``(pointer, kind, value)`` of every member of ``value`` whose name names a secret and
    whose string value is one (docs/inspect.md, "Keys that name a secret": a key counts alike in
    a text and in a JSON value), within the walk's bounds (depth, strings). A pointer is built
    only for a member found; what each name says is remembered (names repeat from value to
    value: ``type``, ``text``, ``role``)."""
    out: list[tuple[str, str, str]] = []
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]  # (item, depth, its path: (parent's, key))
    seen = 0
    names = _NAMES
    while stack:
        item, depth, path = stack.pop()
        if depth >= MAX_DEPTH:
            continue
        if item.__class__ is dict:
            for k, v in item.items():
                seen += 1
                if v.__class__ is str:
                    if len(v) < _MIN_VALUE or k.__class__ is not str:
                        continue
                    named = names.get(k)
                    if named is None:
                        named = key_kind(k) in ASSIGNED_KINDS
                        if len(names) < _NAMES_MAX and len(k) <= 128:  # (bounded in bytes too)
                            names[k] = named
                    if named:
                        kind = member_secret(k, v)
                        if kind is not None:
                            out.append((_pointer((path, k)), kind, v))
                elif v.__class__ is dict or v.__class__ is list:
                    stack.append((v, depth + 1, (path, k)))
        elif item.__class__ is list:
            seen += len(item)
            for i, v in enumerate(item):
                if v.__class__ is dict or v.__class__ is list:
                    stack.append((v, depth + 1, (path, i)))
        if seen > MAX_STRINGS:
            break
    return out


_NAMES: dict[str, bool] = {}  # member name -> whether it names a secret (bounded: _NAMES_MAX names)
_NAMES_MAX = 4096


def _pointer(path: Any) -> str:
    parts: list[str] = []
    while path is not None:
        path, key = path
        parts.append(_escape(str(key)))
    return "/" + "/".join(reversed(parts))


def _merged(a: list[secrets.Secret], b: list[secrets.Secret]) -> list[secrets.Secret]:
    out: list[secrets.Secret] = []
    for s in sorted(a + b, key=lambda s: (s.start, -s.end)):
        if out and s.start < out[-1].end:
            last = out[-1]
            if s.end > last.end:
                out[-1] = secrets.Secret(last.kind, last.start, s.end)
            continue
        out.append(s)
    return out


def _masked(text: str, found: list[secrets.Secret]) -> str:
    parts: list[str] = []
    at = 0
    for kind, start, end in found:
        parts.append(text[at:start])
        parts.append(secrets.marker(kind))
        at = end
    parts.append(text[at:])
    return "".join(parts)


def splice(line: bytes, changed: dict[str, str]) -> bytes | None:
    """``line`` (one JSON text, valid UTF-8) with every string token whose text is a key of
    ``changed`` replaced by the JSON of its new text (ASCII escapes), every other byte
    unchanged; None when no token was found to replace, or the line holds a string that does
    not read (the caller then writes the value anew).

    Outside strings JSON has no ``"``: each token starts at the next ``"`` after the one before,
    and the standard library's C string reader finds its end and its text, so a megabyte of one
    string costs two searches and holds nothing per byte or per escape."""
    if not changed:
        return line
    text = line.decode("utf-8")
    find = text.find
    get = changed.get
    parts: list[str] = []
    at = 0
    start = find('"')
    while start >= 0:
        try:
            value, end = scanstring(text, start + 1, False)
        except ValueError:  # a string that does not end, or a bad escape
            return None
        new = get(value)
        if new is not None:
            parts.append(text[at:start])
            parts.append(json.dumps(new, ensure_ascii=True))
            at = end
        start = find('"', end)
    if not parts:
        return None
    parts.append(text[at:])
    return "".join(parts).encode("utf-8", "surrogatepass")


_NOTHING = Scan([], 0, frozenset(), [], {})
NOTHING: Scan = _NOTHING  # what scan() returns when it found nothing and changed nothing (never mutated)
