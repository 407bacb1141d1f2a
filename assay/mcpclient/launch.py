"""Which servers a client config starts, and how (docs/tools.md, "A client's servers"):
the entries of the file `assay mcp protect` would edit, read with the client table and the
config reader discover uses (:func:`assay.clients.configs.config_document`,
:func:`assay.clients.server_maps`). Sans-IO: the file's bytes in, :class:`Launch` values out.

A stdio entry is started as the client starts it: its ``command`` and ``args`` as written (so a
protected entry runs through its `assay mcp wrap` line, with its policy), its ``env`` on top of
this environment, in its ``cwd`` when it gives one (a relative ``cwd`` is taken from the config
file's directory). A remote entry (``url``) is listed as skipped, with the reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from assay.clients import ConfigLocation, server_maps
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
                out.append(Launch(str(name), None, skipped=f"a remote server ({transport['type']} {transport['url']}): "
                                                            "assay mcp tools starts stdio servers only"))
                continue
            argv = (transport["command"], *transport["args"])
            env, cwd = _raw_env_cwd(raw, location)
            out.append(Launch(str(name), argv, env, cwd, parse_wrapped(argv) is not None))
    return out, errors
