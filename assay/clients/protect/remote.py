"""Remote (URL) server entries under `assay mcp wrap --url` (docs/protect.md, "Remote servers").

A remote entry (``url``, ``serverUrl`` (Windsurf), ``httpUrl`` (Gemini CLI), with ``type`` or
``transport`` and ``headers``) becomes a stdio entry in the client's stdio spelling that runs
``<assay> mcp wrap [options] --url URL [--transport sse] [--header-env Name=ASSAY_HEADER_<n>]...``.
Each header's value goes into the entry's ``env`` as ``ASSAY_HEADER_<n>``, its text copied as it
was (a ``${VAR}`` the client expands stays one), never into ``args``, which every user of the
machine can read in a process list.

The entry is rewritten whole: its other members keep their text and order, the URL member
becomes ``command`` and ``args``, ``headers`` becomes ``env``, ``type`` becomes the client's
stdio type (or goes). protect's record keeps the entry's original text and the text it wrote,
with every header value cut out (a hole, ``NUL n NUL``: a NUL is never in JSON or TOML text), so
the record holds no header value; undo takes the values from the entry as it is and puts the
original text back byte for byte. Sans-IO.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from assay.clients import ConfigLocation, client_info
from assay.clients.protect.arrays import _string_end, render_array, render_string
from assay.clients.protect.model import HOLE, EntryRecord, Member, MemberEdit, ProtectError, Remote, Slot, WrapOptions
from assay.clients.protect.tomlremote import toml_entry
from assay.clients.protect.wrapline import header_env, wrapped_url_args

__all__ = ["URL_KEYS", "Remote", "is_remote", "read_remote", "wrap_remote", "match_holes", "fill_holes"]

URL_KEYS = ("url", "serverUrl", "httpUrl")
_TYPE_KEYS = ("type", "transport")
_HTTP = ("http", "streamable-http", "streamablehttp", "streamable_http")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")  # an HTTP header name (RFC 9110 token)


def is_remote(raw: Any) -> bool:
    """An entry without ``command`` that has a URL member (docs/discover.md, "Config files")."""
    return isinstance(raw, dict) and raw.get("command") is None and any(isinstance(raw.get(k), str) for k in URL_KEYS)


def _headers_key(location: ConfigLocation) -> str:
    return "http_headers" if location.toml else "headers"


def read_remote(raw: Mapping[str, Any], location: ConfigLocation) -> Remote | str:
    """The remote entry ``raw``, or the one-line reason protect leaves it as it is."""
    keys = [k for k in URL_KEYS if k in raw]
    if len(keys) != 1:
        return "more than one URL member (" + ", ".join(keys) + "); left as is"
    url = raw[keys[0]]
    if not url.strip():
        return "its URL is empty; left as is"
    kinds = [k for k in _TYPE_KEYS if k in raw]
    if len(kinds) > 1:
        return 'both "type" and "transport"; left as is'
    kind = raw[kinds[0]] if kinds else None
    if kind is not None and not isinstance(kind, str):
        return f'"{kinds[0]}" is not a string; left as is'
    word = (kind or "").lower()
    if word in ("ws", "websocket", "web_socket", "web-socket") or url.lower().startswith(("ws://", "wss://")):
        return "a WebSocket server; wrap --url speaks Streamable HTTP and HTTP+SSE only; left as is"
    if word and word != "sse" and word not in _HTTP:
        return f'"{kinds[0]}" is {json.dumps(kind, ensure_ascii=False)}, not a transport wrap --url speaks; left as is'
    # Gemini CLI: "url" is an SSE endpoint, "httpUrl" a Streamable HTTP one.
    sse = word == "sse" or (not word and location.client == "gemini_cli" and keys[0] == "url")
    env_headers: tuple[tuple[str, str], ...] = ()
    bearer: str | None = None
    if location.toml:  # docs/protect.md, "Remote servers": Codex's variables pass on through env_vars
        for key in ("bearer_token", "oauth"):
            if key in raw:
                return f'"{key}": Codex reads this from its own config or store, which wrap does not see; left as is'
        got = _codex_env(raw)
        if isinstance(got, str):
            return got
        env_headers, bearer = got
    hkey = _headers_key(location)
    headers = raw.get(hkey, {})
    if headers is None:
        headers = {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        return f'"{hkey}" is not an object of strings; left as is'
    if headers and "env" in raw:
        return f'it has both "{hkey}" and "env"; left as is'
    for name, value in headers.items():
        if not _TOKEN.match(name):
            return f"the header name {json.dumps(name, ensure_ascii=False)} is not an HTTP header name; left as is"
        if any(c in value for c in "\r\n\x00"):
            return f"the value of header {name} holds a line break or NUL; left as is"
    names = [n.lower() for n in headers] + [n.lower() for n, _ in env_headers]
    if len(set(names)) != len(names):
        return 'a header is named twice in "http_headers" and "env_http_headers" (case aside); left as is'
    if bearer is not None and "authorization" in names:
        return 'both "bearer_token_env_var" and an Authorization header; left as is'
    return Remote(keys[0], url, sse, tuple(headers.items()), env_headers, bearer)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # a variable wrap's --header-env can name


def _codex_env(raw: Mapping[str, Any]) -> tuple[tuple[tuple[str, str], ...], str | None] | str:
    """Codex's ``env_http_headers`` (header name -> variable) and ``bearer_token_env_var`` of a
    remote entry, checked; or the reason the entry is left as it is."""
    if "env_vars" in raw:
        return 'a remote entry with "env_vars"; left as is'
    bearer = raw.get("bearer_token_env_var")
    if bearer is not None and (not isinstance(bearer, str) or not _ENV_NAME.match(bearer)):
        return '"bearer_token_env_var" is not a variable name; left as is'
    table = raw.get("env_http_headers")
    if table is None:
        return (), bearer
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        return '"env_http_headers" is not a table of strings; left as is'
    for name, var in table.items():
        if not _TOKEN.match(name):
            return f"the header name {json.dumps(name, ensure_ascii=False)} is not an HTTP header name; left as is"
        if not _ENV_NAME.match(var):
            return f'the variable of header {name} in "env_http_headers" is not a variable name; left as is'
    return tuple(table.items()), bearer


def _hole(n: int) -> str:
    return f"{HOLE}{n}{HOLE}"


def fill_holes(template: str, values: Mapping[int, str]) -> str:
    """``template`` with each hole replaced by the text ``values`` gives it."""
    parts = template.split(HOLE)
    return "".join(part if i % 2 == 0 else values[int(part)] for i, part in enumerate(parts))


def match_holes(text: str, template: str) -> dict[int, str] | None:
    """The text of each hole when ``text`` is ``template`` with a string literal in each hole;
    else None."""
    parts = template.split(HOLE)
    if len(parts) % 2 == 0:
        return None
    got: dict[int, str] = {}
    pos = 0
    for i, part in enumerate(parts):
        if i % 2 == 0:
            if not text.startswith(part, pos):
                return None
            pos += len(part)
            continue
        if pos >= len(text) or text[pos] not in "\"'":
            return None
        end = _string_end(text, pos)
        got[int(part)] = text[pos:end]
        pos = end
    return got if pos == len(text) else None


def _key_end(text: str, member: Member) -> int:
    return _string_end(text, member.start)


def _colon(text: str, scan: str, member: Member) -> str:
    gap = text[_key_end(text, member) : member.value[0]]
    return gap if scan[_key_end(text, member) : member.value[0]] == gap and gap.strip() == ":" else ": "


def _joined(text: str, scan: str, span: tuple[int, int], members: Sequence[Member], items: Sequence[str]) -> str:
    """``items`` as an object laid out like the object at ``span`` (its opening and closing text
    kept, the separator and indentation of its first member)."""
    start, end = span
    if not members:
        return "{" + ", ".join(items) + "}"
    lead = text[start + 1 : members[0].start]
    trail = text[members[-1].value[1] : end - 1]
    if "\n" in scan[start + 1 : members[0].start]:
        indent = lead.rsplit("\n", 1)[1]
        eol = "\r\n" if "\r\n" in lead else "\n"
        sep = "," + eol + (indent if not indent.strip() else "")
    else:
        sep = ", "
    return "{" + lead + sep.join(items) + trail + "}"


def _gaps_have_comments(text: str, scan: str, members: Sequence[Member]) -> bool:
    return any(text[a.value[1] : b.start] != scan[a.value[1] : b.start] for a, b in zip(members, members[1:]))


def _json_entry(
    text: str, scan: str, slot: Slot, remote: Remote, args: list[str], options: WrapOptions, location: ConfigLocation
) -> tuple[str, str, dict[int, str]]:
    """(original template, written template, hole texts) of a JSON entry."""
    assert slot.members is not None
    span = slot.spans[()]
    holes: dict[int, str] = {}
    cuts: list[tuple[int, int, int]] = []
    stdio_type = client_info(location.client).stdio_type if location.client in _labels() else None
    items: list[str] = []
    for m in slot.members:
        own = text[m.start : m.value[1]]
        if m.key == remote.url_key:
            colon = _colon(text, scan, m)
            items.append(render_string("command", False) + colon + render_string(options.assay, False))
            items.append(render_string("args", False) + colon + render_array(args, False))
        elif m.key in _TYPE_KEYS:
            if m.key == "type" and stdio_type is not None:
                items.append(text[m.start : m.value[0]] + render_string(stdio_type, False))
        elif m.key == "headers" and m.inner is not None:
            colon = _colon(text, scan, m)
            env_items = []
            for n, h in enumerate(m.inner, 1):
                holes[n] = text[h.value[0] : h.value[1]]
                cuts.append((h.value[0] - span[0], h.value[1] - span[0], n))
                env_items.append(render_string(header_env(n), False) + _colon(text, scan, h) + _hole(n))
            items.append(render_string("env", False) + colon + _joined(text, scan, m.value, m.inner, env_items))
        else:
            items.append(own)
    original = text[span[0] : span[1]]
    for s, e, n in sorted(cuts, reverse=True):
        original = original[:s] + _hole(n) + original[e:]
    written = _joined(text, scan, span, slot.members, items)
    return original, written, holes


def _labels() -> set[str]:
    from assay.clients import CLIENTS

    return {c.label for c in CLIENTS}


def wrap_remote(
    text: str, scan: str, slot: Slot, options: WrapOptions, location: ConfigLocation
) -> tuple[int, int, str, EntryRecord, Any, str, str] | str:
    """The edit that wraps the remote entry of ``slot``: ``(start, end, new text, record,
    the entry's value after it, what it runs, the wrap options)``, or the reason it is left."""
    remote = read_remote(slot.raw, location)
    if isinstance(remote, str):
        return remote
    if location.toml:
        got = toml_entry(text, slot, remote)
        if isinstance(got, str):
            return got
        span, original, holes, render = got
        args = wrapped_url_args(
            slot.name,
            remote.url,
            remote.sse,
            [h for h, _ in remote.headers],
            options,
            client=location.client,
            env_headers=remote.env_headers,
            bearer_env=remote.bearer_env,
        )
        written = render(options.assay, args)
    else:
        if slot.members is None or () not in slot.spans:
            return "entry is not an object; left as is"
        span = slot.spans[()]
        args = wrapped_url_args(
            slot.name, remote.url, remote.sse, [h for h, _ in remote.headers], options, client=location.client
        )
        original, written, holes = _json_entry(text, scan, slot, remote, args, options, location)
    new_text = fill_holes(written, holes)
    value = entry_value(new_text, location.toml)
    want_env = {header_env(n): v for n, (_, v) in enumerate(remote.headers, 1)}
    if (
        value.get("command") != options.assay
        or value.get("args") != args
        or (want_env and value.get("env") != want_env)
        or value.get("env_vars", []) != remote.forwarded
    ):
        raise ProtectError(
            f"the rewrite of {json.dumps(slot.name, ensure_ascii=False)} does not read back as "
            "intended; nothing was written"
        )
    record = EntryRecord(slot.map, slot.name, (MemberEdit((), original, written),))
    note = ""
    if not location.toml and slot.members and _gaps_have_comments(text, scan, slot.members):
        note = " (the comments between its members are dropped; undo puts them back)"
    shown = args[: args.index("--url")][2:]
    return span[0], span[1], new_text, record, value, shlex.join(["--url", remote.url]) + note, shlex.join(shown)


def entry_value(entry_text: str, toml: bool) -> Any:
    """The value of a whole entry's text (a JSON object, or a TOML table's body)."""
    if toml:
        import tomllib

        return tomllib.loads(entry_text)
    from assay.discover import strip_jsonc

    return json.loads(strip_jsonc(entry_text))
