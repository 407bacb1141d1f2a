"""Client config files (sans-IO, docs/discover.md, "Config files"): a file's bytes -> server
entries and per-file errors. A malformed file or entry never crashes the scan and is never
skipped silently: it becomes an entry of the ``errors`` list."""

from __future__ import annotations

import json
from typing import Any

from assay.clients import ConfigLocation
from assay.discover.commandline import _auth_from_names
from assay.clients.wrapped import parse_wrapped

__all__ = ["strip_jsonc", "config_document", "parse_config_file"]


def strip_jsonc(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments and trailing commas outside strings (VS Code files).

    Removed characters become spaces (newlines are kept), so JSON error positions still point
    at the right line and column of the original file.
    """
    out: list[str] = []
    i, n = 0, len(text)
    pending_comma: int | None = None  # index in ``out`` of a comma that may be trailing
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            pending_comma = None
            i = j + 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
            continue
        if c in "}]" and pending_comma is not None:
            out[pending_comma] = " "
        if c == ",":
            pending_comma = len(out)
        elif not c.isspace():
            pending_comma = None
        out.append(c)
        i += 1
    return "".join(out)


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _credential_headers(names: list[str]) -> bool:
    """Does one of these header names carry a credential (docs/discover.md, "Output")?"""
    return any(h.upper() == "AUTHORIZATION" or "KEY" in h.upper() or "TOKEN" in h.upper() for h in names)


def _wrap_header_names(options: dict[str, object]) -> list[str]:
    """The header names a wrap --url line sends (--header 'Name: value', --header-env Name=VAR,
    and the bearer forms), never their values."""
    names: list[str] = []
    for field in ("header", "header_env", "header_env_if_set"):
        given = options.get(field, ())
        for text in given if isinstance(given, tuple) else ():
            names.append(str(text).partition(":" if field == "header" else "=")[0].strip())
    if options.get("bearer_env") is not None:
        names.append("Authorization")
    return names


def _error(location: ConfigLocation, message: str) -> dict[str, Any]:
    return {"path": location.path, "client": location.client, "error": message}


def _server_entry(name: str, raw: Any, location: ConfigLocation) -> dict[str, Any] | str:
    """One config server -> discover entry, or an error message for this server."""
    if not isinstance(raw, dict):
        return f"server {_quote(name)}: entry is not an object"
    if location.client == "zed" and isinstance(raw.get("command"), dict):
        # Zed's older form: "command": {"path", "args", "env"} (docs/discover.md, "Config files")
        raw = {
            **raw,
            **{k: v for k, v in raw["command"].items() if k in ("args", "env")},
            "command": raw["command"].get("path"),
        }
    env = raw.get("env", {})
    if env is None:
        env = {}
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        return f'server {_quote(name)}: "env" is not an object of strings'
    env_names = list(env)
    forwarded = raw.get("env_vars")  # Codex: variables passed on from its own environment
    if isinstance(forwarded, list):
        env_names += [
            v if isinstance(v, str) else str(v.get("name"))
            for v in forwarded
            if isinstance(v, str) or (isinstance(v, dict) and isinstance(v.get("name"), str))
        ]
    source = {"type": "config_file", "path": location.path, "client": location.client}
    command = raw.get("command")
    if command is not None:
        if not isinstance(command, str):
            return f'server {_quote(name)}: "command" is not a string'
        args = raw.get("args", [])
        if args is None:
            args = []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            return f'server {_quote(name)}: "args" is not a list of strings'
        transport: dict[str, Any] = {"type": "stdio", "command": command, "args": list(args)}
        line = parse_wrapped([command, *args])  # docs/discover.md, "Output"
        wrapped = line is not None
        remote = line is not None and line.url is not None  # protect's wrap --url (docs/protect.md, "Remote servers")
        auth = _auth_from_names(env_names)
        if auth == "none" and remote and line is not None and _credential_headers(_wrap_header_names(line.options)):
            auth = "api_key"  # the headers wrap sends (their values are in env as ASSAY_HEADER_<n>)
    else:
        url = raw.get("url", raw.get("serverUrl", raw.get("httpUrl")))
        if not isinstance(url, str):
            return f'server {_quote(name)}: neither "command" nor "url" is a string'
        kind = str(raw.get("type", raw.get("transport", ""))).lower()
        if kind == "sse":
            ttype = "sse"
        elif kind in ("ws", "websocket", "web_socket") or url.lower().startswith(("ws://", "wss://")):
            ttype = "web_socket"
        else:
            ttype = "http"
        transport = {"type": ttype, "url": url}
        wrapped = False  # a remote entry the client reaches itself: nothing guards it
        remote = True
        header_names = []
        for key in ("headers", "http_headers", "env_http_headers"):  # the last two: Codex
            headers = raw.get(key)
            header_names += [str(h) for h in headers] if isinstance(headers, dict) else []
        if isinstance(raw.get("bearer_token_env_var"), str) or isinstance(raw.get("bearer_token"), str):
            header_names.append("Authorization")  # Codex: Authorization: Bearer <the value>
        auth = _auth_from_names(env_names)
        if auth == "none" and _credential_headers(header_names):
            auth = "api_key"
    return {
        "id": f"{location.client}-{name}",
        "name": name,
        "source": source,
        "transport": transport,
        "status": "configured",
        "policy_status": "managed" if wrapped else "unmanaged",
        "auth": auth,
        "env_vars": env_names,
        "risk_hints": [],
        **({"remote": True} if remote else {}),
        "wrapped": wrapped,
    }


def _load_toml(text: str) -> Any:
    import tomllib

    return tomllib.loads(text)


def config_document(data: bytes, location: ConfigLocation) -> tuple[Any, list[dict[str, Any]]]:
    """A config file's bytes read as its client reads them (JSON, JSON with comments, TOML):
    ``(document, [])``, or ``(None, [the file's error])``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [_error(location, f"not valid UTF-8 (byte {exc.start})")]
    if text.startswith("\ufeff"):
        text = text[1:]
    if location.toml:
        try:
            doc = _load_toml(text)
        except ValueError as exc:
            return None, [_error(location, f"invalid TOML: {exc}")]
        except RecursionError:
            return None, [_error(location, "invalid TOML: nested too deeply")]
    else:
        if location.jsonc:
            text = strip_jsonc(text)
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, [_error(location, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")]
        except RecursionError:
            return None, [_error(location, "invalid JSON: nested too deeply")]
        if not isinstance(doc, dict):
            return None, [_error(location, "top level is not a JSON object")]
    return doc, []


def parse_config_file(data: bytes, location: ConfigLocation) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Parse one config file's bytes into ``(servers, errors)`` (docs/discover.md, 'Config files').

    A file without the server map holds no servers and is not an error (Claude Desktop, Gemini
    CLI and Zed keep other settings in the same file). One bad server entry is reported and the
    file's other servers are still listed. JSON, JSON with comments (VS Code, Zed) and TOML
    (Codex CLI) are read as the client reads them.
    """
    from assay.clients import server_maps

    doc, problems = config_document(data, location)
    if doc is None:
        return [], problems
    servers: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for path, table in server_maps(doc, location):
        if table is None:
            continue
        if not isinstance(table, dict):
            errors.append(_error(location, f"{_quote('.'.join(path))} is not an object"))
            continue
        for name, raw in table.items():
            entry = _server_entry(name, raw, location)
            if isinstance(entry, str):
                errors.append(_error(location, entry))
            else:
                servers.append(entry)
    return servers, errors
