"""Which servers a client config starts, and how (docs/tools.md, "A client's servers"):
the entries of the file `assay mcp protect` would edit, read with the client table and the
config reader discover uses (:func:`assay.clients.configs.config_document`,
:func:`assay.clients.server_maps`). Sans-IO: the file's bytes in, :class:`Launch` values out.

A stdio entry is started as the client starts it: its ``command`` and ``args`` as written (so a
protected entry runs through its `assay mcp wrap` line, with its policy), its ``env`` on top of
this environment, in its ``cwd`` when it gives one (a relative ``cwd`` is taken from the config
file's directory). A remote entry (``url``) is listed as skipped, with the reason; so is an
entry with a value only the client can fill in (``${input:...}``, which VS Code asks the person
for; ``${command:...}``): started with the reference as its text, the server would fail in a way
that says nothing (docs/tools.md, "A client's servers").
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from assay.clients import ConfigLocation, client_info, server_maps
from assay.clients.configs import _server_entry, config_document
from assay.clients.wrapped import parse_wrapped

__all__ = ["Launch", "launches"]


@dataclass(frozen=True)
class Launch:
    """One server entry: ``argv`` (None when skipped), ``env`` (the entry's own variables),
    ``cwd``, whether it runs under `assay mcp wrap`, and why it is skipped (or None)."""

    name: str
    argv: tuple[str, ...] | None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    wrapped: bool = False
    skipped: str | None = None


def _raw_env_cwd(raw: dict[str, Any], location: ConfigLocation) -> tuple[dict[str, str], str | None]:
    env = raw.get("env") or {}
    if location.client == "zed" and isinstance(raw.get("command"), dict):  # Zed's older form
        env = raw["command"].get("env") or env
    cwd = raw.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        cwd = None
    elif not os.path.isabs(cwd):
        cwd = os.path.join(os.path.dirname(location.path), cwd)
    return {str(k): v for k, v in env.items() if isinstance(v, str)} if isinstance(env, dict) else {}, cwd


# a reference only the client expands: VS Code's input and command variables
_CLIENT_ONLY = re.compile(r"\$\{(?:input|command):[^}]*\}")


def client_only(argv: tuple[str, ...], env: dict[str, str]) -> tuple[str, str] | None:
    """Where the first reference only the client can expand sits (``env NAME``, ``args[3]``,
    ``command``) and the reference, or None."""
    places = [("command", argv[0])] + [(f"args[{i}]", a) for i, a in enumerate(argv[1:])]
    places += [(f"env {k}", v) for k, v in env.items()]
    for where, text in places:
        found = _CLIENT_ONLY.search(text)
        if found is not None:
            return where, found.group(0)
    return None


def _header_vars(options: dict[str, object]) -> dict[str, str]:
    """variable -> header name of a wrap line's ``--header-env Name=VAR`` options."""
    given = options.get("header_env", ())
    pairs = [str(t).partition("=") for t in (given if isinstance(given, tuple) else ())]
    return {var: name for name, _, var in pairs}


def launches(data: bytes, location: ConfigLocation) -> tuple[list[Launch], list[str]]:
    """The server entries of one config file, in file order, and one line per entry (or file)
    that cannot be read."""
    doc, problems = config_document(data, location)
    if doc is None:
        return [], [p["error"] for p in problems]
    out: list[Launch] = []
    errors: list[str] = []
    for path, table in server_maps(doc, location):
        if not isinstance(table, dict):
            if table is not None:
                errors.append(f"{'.'.join(path)} is not an object")
            continue
        for name, raw in table.items():
            entry = _server_entry(name, raw, location)
            if isinstance(entry, str):
                errors.append(entry)
                continue
            transport = entry["transport"]
            if transport["type"] != "stdio":
                out.append(
                    Launch(
                        str(name),
                        None,
                        skipped=f"a remote server ({transport['type']} {transport['url']}): "
                        "assay mcp tools starts stdio servers only",
                    )
                )
                continue
            argv = (transport["command"], *transport["args"])
            env, cwd = _raw_env_cwd(raw, location)
            line = parse_wrapped(argv)
            reference = client_only(argv, env)
            if reference is not None:  # docs/tools.md, "A client's servers"
                where, ref = reference
                headers = _header_vars(line.options if line is not None else {})
                if where.startswith("env ") and where[4:] in headers:  # protect's ASSAY_HEADER_<n>
                    where = f"header {headers[where[4:]]} ({where})"
                client = client_info(location.client).display
                out.append(
                    Launch(
                        str(name),
                        argv,
                        env,
                        cwd,
                        line is not None,
                        skipped=(
                            f"its {where} holds {ref}, a value only {client} can fill in (it asks for it when it starts "
                            f"the server); assay mcp tools cannot, so it does not start the server"
                        ),
                    )
                )
                continue
            out.append(Launch(str(name), argv, env, cwd, line is not None))
    return out, errors
