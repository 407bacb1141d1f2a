"""The wrap line of a protected entry (docs/protect.md): ``<assay> mcp wrap --policy P --label
NAME [log options] -- <command> <args...>``, written with the flags of wrap's one option table
(:mod:`assay.wrap.options`) and read back by the one reader of wrap lines,
:mod:`assay.clients.wrapped`. Sans-IO."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence

from assay.clients.protect.model import WrapOptions
from assay.wrap.optionline import flag_of, option_tokens
from assay.clients.wrapped import parse_wrapped

__all__ = ["wrapped_args", "wrapped_url_args", "header_env", "unwrap_args", "log_name", "event_source"]

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


def log_name(name: str, client: str = "") -> str:
    """The stem of a server's log files (docs/protect.md, "Log files"): ``<client>-<server>``
    (``claude_desktop-filesystem``), so servers of one name in two clients never share a log
    file. A client label (:data:`assay.clients.CLIENTS`) has no ``-``, so the first ``-`` tells
    the two parts apart; without a client, the server's part alone."""
    slug = _slug(name)
    return f"{_slug(client)}-{slug}" if client else slug


def event_source(name: str, client: str = "") -> str:
    """The event source of a server's logs: ``assay://protect/<client>/<server>``."""
    return f"assay://protect/{_slug(client)}/{_slug(name)}" if client else f"assay://protect/{_slug(name)}"


def wrapped_args(name: str, command: str, args: Sequence[str], options: WrapOptions, client: str = "") -> list[str]:
    """The ``args`` of a protected entry whose ``command`` is ``options.assay``. ``client``, the
    client's label, names the log files and the event source (:func:`log_name`)."""
    return _option_args(name, options, client) + ["--", command, *args]


def header_env(n: int) -> str:
    """The env variable of a remote entry's ``n``-th header value (1-based; docs/protect.md,
    "Remote servers")."""
    return f"ASSAY_HEADER_{n}"


def wrapped_url_args(
    name: str,
    url: str,
    sse: bool,
    header_names: Sequence[str],
    options: WrapOptions,
    client: str = "",
    *,
    env_headers: Sequence[tuple[str, str]] = (),
    bearer_env: str | None = None,
) -> list[str]:
    """The ``args`` of a protected remote entry (docs/protect.md, "Remote servers"): the usual
    options, then ``--url URL [--transport sse] [--header-env Name=ASSAY_HEADER_<n>]...``.
    Only the header names are on the line; their values are in the entry's ``env``, named with
    no ``${...}`` a client could expand (from its own environment, where they are not set).
    Codex's headers read from its environment follow: ``--header-env-if-set Name=VAR`` for each
    of ``env_http_headers`` and ``--bearer-env VAR`` for ``bearer_token_env_var``, the variables
    passed on to the wrapped entry by its ``env_vars``."""
    out = _option_args(name, options, client) + option_tokens(flag_of("url"), url)
    if sse:
        out += option_tokens(flag_of("transport"), "sse")
    for n, header in enumerate(header_names, 1):
        out += option_tokens(flag_of("header_env"), f"{header}={header_env(n)}")
    for header, var in env_headers:
        out += option_tokens(flag_of("header_env_if_set"), f"{header}={var}")
    if bearer_env is not None:
        out += option_tokens(flag_of("bearer_env"), bearer_env)
    return out


def _option_args(name: str, options: WrapOptions, client: str) -> list[str]:
    out = [
        "mcp",
        "wrap",
        *option_tokens(flag_of("policy_path"), options.policy),
        *option_tokens(flag_of("label"), name),
    ]
    if options.log_dir is not None:
        stem = log_name(name, client)
        out += [
            *option_tokens(flag_of("event_source"), event_source(name, client)),
            *option_tokens(flag_of("decision_log"), os.path.join(options.log_dir, f"{stem}.decisions.ndjson")),
            *option_tokens(flag_of("audit_log"), os.path.join(options.log_dir, f"{stem}.audit.ndjson")),
        ]
    if options.observe:
        out.append(flag_of("dry_run"))
    if options.hide_denied_tools:
        out.append(flag_of("hide_denied_tools"))
    if options.declared_manifest is not None:
        out += option_tokens(flag_of("declared_manifest"), options.declared_manifest)
    if options.log_arguments:
        out.append(flag_of("log_arguments"))
    return out


def unwrap_args(command: str, args: Sequence[str]) -> tuple[str, list[str]] | None:
    """The original ``(command, args)`` of an entry of the shape protect writes (``<assay> mcp
    wrap [options] -- <command> [args...]``, read by :func:`assay.clients.wrapped.parse_wrapped`,
    older protect's lines included), or None."""
    line = parse_wrapped([command, *args], written_by_older=True)
    if line is None or line.interpreter is not None or line.url is not None:
        return None
    return line.command, list(line.args)
