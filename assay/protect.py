"""`assay mcp protect`: put every stdio server of a client config behind `assay mcp wrap`.

Sans-IO core: :func:`protect_text` and :func:`undo_text` take a config file's text and return
the new text plus one :class:`Change` per server; nothing here touches the disk. JSON and JSON
with comments are edited in place: only the ``command`` and ``args`` values of the servers that
change are replaced, so comments, key order, indentation and every other member stay byte for
byte. TOML (Codex CLI) is edited with ``tomlkit``, which keeps comments and layout.

A protected server runs ``<assay> mcp wrap --policy P --label NAME [log options] -- <command>
<args...>``: every token before ``--`` is a wrap option, everything after it is the original
command line, which is how :func:`undo_text` restores it exactly.

The file layer at the bottom (:func:`apply_to_file`) reads, writes a backup, and replaces the
file atomically, refusing when the file changed while protect worked.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
# json.decoder sets scanstring (the C one, or its Python fallback); typeshed leaves it out as undocumented.
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from assay.cli.wrap_args import BY_FLAG, option_tokens
from assay.clients import ConfigLocation
from assay.discover import runs_assay_wrap, strip_jsonc

__all__ = [
    "ProtectError",
    "Change",
    "Result",
    "WrapOptions",
    "wrapped_args",
    "unwrap_args",
    "protect_text",
    "undo_text",
    "unified_diff",
    "STARTER_POLICY",
    "apply_to_file",
    "FileOutcome",
    "write_starter_policy",
]

_ASSAY_NAMES = frozenset({"assay", "assay.exe", "assay.cmd", "assay.bat"})
_URL_KEYS = ("url", "serverUrl", "httpUrl")


class ProtectError(Exception):
    """The config cannot be edited safely (unparsable, odd shape, changed meanwhile); nothing
    was written. The message is one line."""


@dataclass(frozen=True)
class WrapOptions:
    """What goes before ``--`` in a protected entry."""

    assay: str
    policy: str
    log_dir: str | None = None


@dataclass(frozen=True)
class Change:
    """What happened to one server: ``wrapped``/``unwrapped`` (changed) or ``skipped``."""

    name: str
    action: str
    detail: str
    where: str = ""

    @property
    def changed(self) -> bool:
        return self.action in ("wrapped", "unwrapped")


@dataclass
class Result:
    text: str
    changes: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.changes)


# --------------------------------------------------------------------------------------------
# The wrapped command line


_DIGESTED = re.compile(r"-[0-9a-f]{8}\Z")  # a name that looks like a digested one gets one too


def _slug(name: str) -> str:
    """The name in file names and the event source. A name that is not already a plain file
    name ("my server", "my/server", "--", "") or has capitals ("GitHub": macOS and Windows
    file systems ignore case) gets a short digest of itself, so two servers of one config never
    share a log file."""
    plain = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    if plain and plain == name == name.lower() and not _DIGESTED.search(name):
        return name
    return f"{plain or 'server'}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def wrapped_args(name: str, command: str, args: Sequence[str], options: WrapOptions) -> list[str]:
    """The ``args`` of a protected entry whose ``command`` is ``options.assay``."""
    out = ["mcp", "wrap", *option_tokens("--policy", options.policy), *option_tokens("--label", name)]
    if options.log_dir is not None:
        slug = _slug(name)
        out += [
            *option_tokens("--event-source", f"assay://protect/{slug}"),
            *option_tokens("--decision-log", os.path.join(options.log_dir, f"{slug}.decisions.ndjson")),
            *option_tokens("--audit-log", os.path.join(options.log_dir, f"{slug}.audit.ndjson")),
        ]
    return out + ["--", command, *args]


def _is_assay(command: str) -> bool:
    return command.replace("\\", "/").rsplit("/", 1)[-1].lower() in _ASSAY_NAMES


def unwrap_args(command: str, args: Sequence[str]) -> tuple[str, list[str]] | None:
    """The original ``(command, args)`` of an entry protect wrote, or None when the entry is
    not of that shape (``<assay> mcp wrap [options] -- <command> [args...]``)."""
    if not _is_assay(command) or list(args[:2]) != ["mcp", "wrap"]:
        return None
    # Walk the options as wrap reads them: a value option given as two tokens takes the next
    # one whatever it looks like, so a label or path of "--" is not taken for the separator.
    i = 2
    while i < len(args):
        token = args[i]
        if token == "--":
            rest = list(args[i + 1 :])
            return (rest[0], rest[1:]) if rest else None
        opt = BY_FLAG.get(token)
        i += 1 if opt is None or opt.kind is bool else 2  # "--flag=value" is one token
    return None


# --------------------------------------------------------------------------------------------
# JSON with value spans


@dataclass
class _Node:
    start: int
    end: int
    value: Any
    members: dict[str, tuple[int, "_Node"]] | None = None  # object: key -> (key start, node)
    items: list["_Node"] | None = None


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WS = " \t\n\r"


class _SpanParser:
    """A strict JSON parser that remembers where each value sits (input already checked by
    :func:`json.loads`, so errors here are unexpected and reported as one line)."""

    def __init__(self, text: str) -> None:
        self.s = text

    def ws(self, i: int) -> int:
        s = self.s
        while i < len(s) and s[i] in _WS:
            i += 1
        return i

    def value(self, i: int) -> _Node:
        s = self.s
        i = self.ws(i)
        c = s[i : i + 1]
        if c == "{":
            members: dict[str, tuple[int, _Node]] = {}
            j = self.ws(i + 1)
            if s[j : j + 1] == "}":
                return _Node(i, j + 1, {}, members=members)
            while True:
                j = self.ws(j)
                if s[j : j + 1] != '"':
                    raise ProtectError(f"expected a member name at offset {j}")
                key, after = scanstring(s, j + 1)
                k = self.ws(after)
                if s[k : k + 1] != ":":
                    raise ProtectError(f"expected ':' at offset {k}")
                node = self.value(k + 1)
                members[key] = (j, node)
                j = self.ws(node.end)
                if s[j : j + 1] == ",":
                    j += 1
                    continue
                if s[j : j + 1] == "}":
                    return _Node(i, j + 1, {k2: n.value for k2, (_, n) in members.items()}, members=members)
                raise ProtectError(f"expected ',' or '}}' at offset {j}")
        if c == "[":
            items: list[_Node] = []
            j = self.ws(i + 1)
            if s[j : j + 1] == "]":
                return _Node(i, j + 1, [], items=items)
            while True:
                node = self.value(j)
                items.append(node)
                j = self.ws(node.end)
                if s[j : j + 1] == ",":
                    j += 1
                    continue
                if s[j : j + 1] == "]":
                    return _Node(i, j + 1, [n.value for n in items], items=items)
                raise ProtectError(f"expected ',' or ']' at offset {j}")
        if c == '"':
            text, end = scanstring(s, i + 1)
            return _Node(i, end, text)
        for word, val in (("true", True), ("false", False), ("null", None)):
            if s.startswith(word, i):
                return _Node(i, i + len(word), val)
        m = _NUMBER.match(s, i)
        if m:
            return _Node(i, m.end(), json.loads(m.group()))
        raise ProtectError(f"unexpected character at offset {i}")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ProtectError(f"duplicate key {json.dumps(key, ensure_ascii=False)} in an object")
        out[key] = value
    return out


def _refuse_constant(name: str) -> Any:
    raise ProtectError(f"{name} is not JSON")


def _parse_json(text: str, jsonc: bool) -> tuple[str, _Node]:
    """``(text the spans index, root node)``; comments are blanked, never removed, so the
    spans index the original text too."""
    scan = strip_jsonc(text) if jsonc else text
    try:
        json.loads(scan, object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        hint = " (this client's file is plain JSON: no comments or trailing commas)" if not jsonc else ""
        raise ProtectError(f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}){hint}") from None
    except RecursionError:
        raise ProtectError("invalid JSON: nested too deeply") from None
    try:
        root = _SpanParser(scan).value(0)
    except RecursionError:
        raise ProtectError("invalid JSON: nested too deeply") from None
    if root.members is None:
        raise ProtectError("the top level is not a JSON object")
    return scan, root


def _json_maps(root: _Node, location: ConfigLocation) -> list[tuple[tuple[str, ...], _Node]]:
    """The server-map nodes, as :func:`assay.clients.server_maps` finds them."""
    out: list[tuple[tuple[str, ...], _Node]] = []
    assert root.members is not None
    if location.servers_key in root.members:
        out.append(((location.servers_key,), root.members[location.servers_key][1]))
    for pattern in location.nested:
        nodes: list[tuple[tuple[str, ...], _Node]] = [((), root)]
        for part in pattern:
            step: list[tuple[tuple[str, ...], _Node]] = []
            for path, node in nodes:
                if node.members is None:
                    continue
                keys = list(node.members) if part == "*" else [part] if part in node.members else []
                step.extend((path + (key,), node.members[key][1]) for key in keys)
            nodes = step
        out.extend(nodes)
    return out


def _dump(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _render_array(values: Sequence[str], scan: str, like: _Node | None, key_start: int) -> str:
    """``values`` as a JSON array laid out like the array it replaces (one line, or one item a
    line with the same indentation), or, with none, like the entry's members."""
    if not values:
        return "[]"
    if like is not None and "\n" not in scan[like.start : like.end]:
        inner = scan[like.start + 1 : like.end - 1]
        sep = ", "
        if like.items and len(like.items) > 1:
            between = scan[like.items[0].end : like.items[1].start]
            if between.strip() == ",":
                sep = between
        pad = " " if inner.startswith(" ") and inner.strip() else ""
        return "[" + pad + sep.join(_dump(v) for v in values) + pad + "]"
    if like is not None and like.items:
        first = like.items[0].start
        item_indent = scan[scan.rfind("\n", like.start, first) + 1 : first]
        close_line = scan.rfind("\n", like.start, like.end - 1)
        close_indent = scan[close_line + 1 : like.end - 1]
        if item_indent.strip() or close_indent.strip():
            return "[" + ", ".join(_dump(v) for v in values) + "]"
        return "[\n" + ",\n".join(item_indent + _dump(v) for v in values) + "\n" + close_indent + "]"
    line_start = scan.rfind("\n", 0, key_start) + 1
    indent = scan[line_start:key_start]
    if like is None and scan.rfind("\n", 0, key_start) >= 0 and not indent.strip():
        unit = "\t" if indent.startswith("\t") else "  "
        return "[\n" + ",\n".join(indent + unit + _dump(v) for v in values) + "\n" + indent + "]"
    return "[" + ", ".join(_dump(v) for v in values) + "]"


def _classify(name: str, raw: Any) -> tuple[str, list[str]] | str:
    """``(command, args)`` of a stdio entry, or the reason it is skipped."""
    if not isinstance(raw, dict):
        return "entry is not an object; left as is"
    command = raw.get("command")
    if command is None:
        if any(isinstance(raw.get(k), str) for k in _URL_KEYS):
            return "remote server (URL); wrap relays stdio servers only"
        return "no \"command\"; left as is"
    if not isinstance(command, str) or not command.strip():
        return "\"command\" is not a non-empty string; left as is"
    kind = raw.get("type")
    if kind is not None and kind != "stdio":
        return f"\"type\" is {_dump(str(kind))}, not stdio; left as is"
    args = raw.get("args", [])
    if args is None:
        args = []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return "\"args\" is not a list of strings; left as is"
    return command, list(args)


@dataclass
class _Edit:
    start: int
    end: int
    text: str


def _edit_entries(text: str, location: ConfigLocation, fn) -> Result:
    """Apply ``fn(name, raw) -> ((command, args) | None, Change)`` to every server of a JSON
    config, replacing only the spans of ``command`` and ``args``."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom) :]
    scan, root = _parse_json(body, location.jsonc)
    edits: list[_Edit] = []
    changes: list[Change] = []
    for path, table in _json_maps(root, location):
        where = ".".join(path)
        if table.value is None:
            continue
        if table.members is None:
            raise ProtectError(f"{_dump(where)} is not an object")
        for name, (_, node) in table.members.items():
            new, change = fn(name, node.value)
            detail = change.detail
            if new is not None and "args" in (node.members or {}):
                _, old_args = node.members["args"]  # type: ignore[index]
                if body[old_args.start : old_args.end] != scan[old_args.start : old_args.end]:
                    detail += " (the comments inside its \"args\" array are dropped)"
            changes.append(Change(change.name, change.action, detail, where))
            if new is None:
                continue
            command, args = new
            assert node.members is not None
            cmd_key_start, cmd_node = node.members["command"]
            edits.append(_Edit(cmd_node.start, cmd_node.end, _dump(command)))
            if "args" in node.members and node.members["args"][1].value is not None:
                _, args_node = node.members["args"]
                edits.append(_Edit(args_node.start, args_node.end, _render_array(args, scan, args_node, cmd_key_start)))
            elif "args" in node.members:
                _, args_node = node.members["args"]
                edits.append(_Edit(args_node.start, args_node.end, _render_array(args, scan, None, cmd_key_start)))
            else:
                before = scan[: cmd_key_start].rstrip(_WS)
                gap = scan[len(before) : cmd_key_start] if before.endswith((",", "{")) else " "
                member = f',{gap}"args": {_render_array(args, scan, None, cmd_key_start)}'
                edits.append(_Edit(cmd_node.end, cmd_node.end, member))
    out = body
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        out = out[: edit.start] + edit.text + out[edit.end :]
    return Result(bom + out, changes)


# --------------------------------------------------------------------------------------------
# TOML (Codex CLI)


def _edit_toml(text: str, location: ConfigLocation, fn) -> Result:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        doc = tomlkit.parse(text)
    except (TOMLKitError, ValueError) as exc:
        raise ProtectError(f"invalid TOML: {exc}") from None
    changes: list[Change] = []
    table = doc.get(location.servers_key)
    if table is None:
        return Result(text, changes)
    if not isinstance(table, dict):
        raise ProtectError(f"{_dump(location.servers_key)} is not a table")
    for name in list(table.keys()):
        entry = table[name]
        new, change = fn(name, entry.unwrap() if hasattr(entry, "unwrap") else entry)
        changes.append(Change(change.name, change.action, change.detail, location.servers_key))
        if new is None:
            continue
        command, args = new
        entry["command"] = command
        array = tomlkit.array()
        array.extend(args)
        entry["args"] = array
    return Result(tomlkit.dumps(doc), changes)


def _edit(text: str, location: ConfigLocation, fn) -> Result:
    if location.toml:
        return _edit_toml(text, location, fn)
    return _edit_entries(text, location, fn)


# --------------------------------------------------------------------------------------------
# The two operations


def protect_text(text: str, location: ConfigLocation, options: WrapOptions) -> Result:
    """Wrap every stdio server that does not run under `assay mcp wrap` yet."""

    def fn(name: str, raw: Any):
        got = _classify(name, raw)
        if isinstance(got, str):
            return None, Change(name, "skipped", got)
        command, args = got
        if runs_assay_wrap([command, *args]):
            return None, Change(name, "skipped", "already runs under assay mcp wrap")
        return (options.assay, wrapped_args(name, command, args, options)), Change(
            name, "wrapped", " ".join([command, *args])
        )

    return _edit(text, location, fn)


def undo_text(text: str, location: ConfigLocation) -> Result:
    """Restore the original command line of every entry protect wrapped."""

    def fn(name: str, raw: Any):
        got = _classify(name, raw)
        if isinstance(got, str):
            return None, Change(name, "skipped", got)
        command, args = got
        original = unwrap_args(command, args)
        if original is None:
            detail = (
                "runs assay mcp wrap in a form protect did not write; left as is"
                if runs_assay_wrap([command, *args])
                else "not protected"
            )
            return None, Change(name, "skipped", detail)
        return original, Change(name, "unwrapped", " ".join([original[0], *original[1]]))

    return _edit(text, location, fn)


def unified_diff(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=path, tofile=f"{path} (protected)"
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


STARTER_POLICY = """\
# assay starter policy, written by `assay mcp protect --init-policy`.
#
# It is deliberately permissive so that the first launch of your client works: every tool is
# allowed, and every call is still checked and recorded. Tighten it from what you see:
#
#   1. Give `assay mcp protect` a log directory (--log-dir DIR) so each server writes a decision
#      log (DIR/<server>.decisions.ndjson: one line per tools/call, allowed or denied) and an
#      audit log (DIR/<server>.audit.ndjson). Read them after a session with your client.
#   2. List the tools you saw and want under tools.allow: once tools.allow is present, every
#      tool not listed is denied.
#   3. Deny the dangerous ones by name or pattern under tools.deny (deny beats allow).
#   4. Give each allowed tool an argument schema under schemas.<tool>, e.g. confine a path
#      argument to one directory with a pattern.
#
# The full format: docs/policy.md of assay.
version: "2.0"
name: starter

tools:
  # allow: ["read_file", "list_directory"]   # uncomment to switch to an allowlist
  deny: []                                   # e.g. ["*delete*", "exec"]

enforcement:
  # A tool without a schema is allowed with a warning in the decision log. Use "deny" once
  # every tool you allow has a schema.
  unconstrained_tools: warn

# schemas:
#   read_file:
#     type: object
#     additionalProperties: false
#     required: [path]
#     properties:
#       path: {type: string, pattern: "^/home/you/projects/"}
"""


# --------------------------------------------------------------------------------------------
# File layer


@dataclass
class FileOutcome:
    result: Result
    original: str = ""
    backup: str | None = None
    written: bool = False


def _read(path: str) -> tuple[bytes, os.stat_result]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise ProtectError(f"{path} does not exist") from None
    except OSError as exc:
        raise ProtectError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ProtectError(f"{path} is not a regular file")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), st
    except OSError as exc:
        raise ProtectError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _decode(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtectError(f"{path} is not valid UTF-8 (byte {exc.start})") from None


def _write_new(path: str, data: bytes, mode: int) -> None:
    _fill(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode), data, mode)


def _fill(fd: int, data: bytes, mode: int) -> None:
    """Give ``fd`` the mode, write all of ``data`` (short writes retried), fsync, close."""
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _backup_path(path: str, now: float) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    base = f"{path}.assay-backup-{stamp}"
    candidate, n = base, 1
    while os.path.lexists(candidate):
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def apply_to_file(
    path: str, location: ConfigLocation, edit, *, dry_run: bool = False, now: float | None = None
) -> FileOutcome:
    """Read ``path``, compute ``edit(text, location)``, and unless ``dry_run`` or nothing
    changed: write a backup next to it, then replace it atomically (a temporary file in the
    same directory, the original mode kept, renamed over it). The file is read again just
    before the rename; if it changed meanwhile, nothing is replaced and ProtectError says so.
    A symlinked config (a dotfiles repository) is edited where the link points, so the link
    stays a link."""
    path = os.path.realpath(path)
    data, st = _read(path)
    original = _decode(data, path)
    result = edit(original, location)
    outcome = FileOutcome(result, original)
    if dry_run or not result.changed:
        return outcome
    mode = stat.S_IMODE(st.st_mode)
    new = result.text.encode("utf-8")
    backup = _backup_path(path, time.time() if now is None else now)
    try:
        _write_new(backup, data, mode)
    except OSError as exc:
        raise ProtectError(f"cannot write the backup {backup}: {exc.strerror or exc}") from None
    outcome.backup = backup
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".assay-protect-", dir=directory)
    except OSError as exc:
        raise ProtectError(f"cannot write in {directory}: {exc.strerror or exc}") from None
    try:
        _fill(fd, new, mode)
        again, st2 = _read(path)
        if again != data or (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino):
            raise ProtectError(f"{path} changed while assay worked on it; nothing was written (run it again)")
        os.replace(tmp, path)
    except OSError as exc:
        raise ProtectError(f"cannot replace {path}: {exc.strerror or exc}") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    outcome.written = True
    return outcome


def write_starter_policy(path: str) -> None:
    """Create ``path`` with :data:`STARTER_POLICY` (never overwrites; parents are created)."""
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
        _write_new(path, STARTER_POLICY.encode("utf-8"), 0o644)
    except FileExistsError:
        raise ProtectError(f"{path} already exists; it was left as is") from None
    except OSError as exc:
        raise ProtectError(f"cannot write the starter policy {path}: {exc.strerror or exc}") from None
