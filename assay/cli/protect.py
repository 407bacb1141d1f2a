"""`assay mcp protect CLIENT --policy P`: a thin layer over :mod:`assay.clients.protect` (docs/protect.md)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Annotated, Literal

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import UsageError, fatal
from assay.clients.table import ConfigLocation

EXIT_REFUSED = 1

# docs/protect.md, "Project scope"
_PROJECT_SCOPE = (
    "--scope project writes a file your team shares, and assay cannot make its entries portable "
    "(no client documents the directory it starts a project's servers in, which a relative policy "
    "path needs); add --absolute to write this machine's paths (assay, policy, log dir) anyway"
)


def _location(label: str, scope: str, config: str | None) -> ConfigLocation:
    from assay import clients

    if config is not None and not config.strip():
        raise UsageError("--config is empty; give the path of the client's config file")
    try:
        return clients.pick_location(
            label,
            scope,
            None if config is None else os.path.abspath(config),
            clients.current_platform(),
            clients.current_home(),
            os.environ,
            os.getcwd(),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _missing(path: str, alias: str) -> int:
    return fatal(
        f"{path} does not exist, so there is nothing to protect (add servers to it first; "
        f"assay mcp config-path {alias} prints an entry)",
        EXIT_REFUSED,
    )


def protect_command(
    client: str,
    /,
    *,
    policy: Annotated[str | None, Parameter(name="--policy")] = None,
    scope: Annotated[Literal["user", "project"], Parameter(name="--scope")] = "user",
    config: Annotated[str | None, Parameter(name="--config")] = None,
    dry_run: Annotated[bool, Parameter(name="--dry-run", negative=())] = False,
    undo: Annotated[bool, Parameter(name="--undo", negative=())] = False,
    init_policy: Annotated[bool, Parameter(name="--init-policy", negative=())] = False,
    log_dir: Annotated[str | None, Parameter(name="--log-dir")] = None,
    observe: Annotated[bool, Parameter(name="--observe", negative=())] = False,
    hide_denied_tools: Annotated[bool, Parameter(name="--hide-denied-tools", negative=())] = False,
    declared_manifest: Annotated[str | None, Parameter(name="--declared-manifest")] = None,
    absolute: Annotated[bool, Parameter(name="--absolute", negative=())] = False,
    log_arguments: Annotated[bool, Parameter(name="--log-arguments", negative=())] = False,
    force: Annotated[bool, Parameter(name="--force", negative=())] = False,
) -> int:
    """Rewrite a client's MCP config so every server, stdio or remote, runs under assay mcp wrap (or undo it).

    Exit codes: 0 done, or nothing to change; 1 refused, nothing written (config unparsable, changed meanwhile, policy does not load, cannot write); 2 usage errors.

    Parameters
    ----------
    client
        claude, claude-code, cursor, vscode, windsurf, gemini, codex or zed (any case).
    policy
        The policy file every wrapped server enforces (required unless --undo).
    scope
        Which of the client's config files: user (default) or project (in the current directory).
    config
        Edit this config file instead of the client's usual one.
    dry_run
        Print what would change, as a diff; write nothing.
    undo
        Restore the original command of every server protect wrapped.
    init_policy
        If --policy names a file that does not exist, write a permissive, commented starter policy there.
    log_dir
        Each wrapped server writes its decision and audit logs into this directory.
    observe
        Wrapped servers decide and log every call but block nothing (wrap's --dry-run).
    hide_denied_tools
        Wrapped servers leave tools the policy denies out of tools/list answers.
    declared_manifest
        Wrapped servers deny tools not in this approved manifest (assay mcp manifest promote).
    absolute
        With --scope project: write this machine's absolute paths (assay, policy, log dir) into the shared project file.
    log_arguments
        Wrapped servers put each call's arguments, secrets redacted, in their logs (wrap's --log-arguments).
    force
        With --undo: also unwrap the entries changed since protect wrote them, as they are now (the wrapping comes off, your edits stay).
    """
    from assay import clients
    from assay.clients import protect as p

    label = clients.resolve_client(client)
    if label is None:
        raise UsageError(f"unknown client {json.dumps(client)}. Supported: {clients.client_names()}")
    info = clients.client_info(label)
    location = _location(label, scope, config)

    def say(line: str = "") -> None:
        sys.stdout.write(line + "\n")

    if undo:
        if (
            policy is not None
            or init_policy
            or log_dir is not None
            or observe
            or hide_denied_tools
            or declared_manifest is not None
            or absolute
            or log_arguments
        ):
            raise UsageError(
                "--undo takes no --policy, --init-policy, --log-dir, --observe, --hide-denied-tools, "
                "--declared-manifest, --absolute or --log-arguments"
            )
        if not os.path.lexists(location.path):
            return _missing(location.path, info.aliases[0])

        def edit(text: str, loc: ConfigLocation, record: Sequence[p.model.EntryRecord] | None) -> p.Result:
            return p.undo_text(text, loc, record, force=force)
    else:
        if force:
            raise UsageError("--force goes with --undo (it unwraps entries changed since protect wrote them)")
        if policy is None or not policy.strip():
            raise UsageError(
                "give the policy the wrapped servers enforce: --policy FILE (add --init-policy to create a starter one)"
            )
        policy_path = os.path.abspath(policy)
        if not os.path.exists(policy_path) and not init_policy:
            raise UsageError(
                f"policy file {policy_path} does not exist; add --init-policy to write a permissive starter policy there"
            )
        if log_dir is not None and not log_dir.strip():
            raise UsageError("--log-dir is empty")
        manifest_path = None
        if declared_manifest is not None:
            manifest_path = os.path.abspath(declared_manifest) if declared_manifest.strip() else ""
            if not manifest_path or not os.path.isfile(manifest_path):
                raise UsageError(f"--declared-manifest {manifest_path or '(empty)'} is not a file")
        if scope == "project" and config is None and not absolute:
            raise UsageError(_PROJECT_SCOPE)
        if not os.path.lexists(location.path):
            return _missing(location.path, info.aliases[0])
        if not os.path.exists(policy_path):
            if dry_run:
                say(f"would write a starter policy to {policy_path}")
            else:
                try:
                    p.write_starter_policy(policy_path)
                except p.ProtectError as exc:
                    return fatal(str(exc), EXIT_REFUSED)
                say(f"wrote a starter policy to {policy_path} (permissive: tighten it from the decision logs)")
        elif init_policy:
            say(f"policy {policy_path} exists; left as is")
        if os.path.exists(policy_path):
            problem = p.check_policy(policy_path, warn=lambda line: sys.stderr.write(line + "\n"))
            if problem is not None:
                return fatal(f"the policy does not load, nothing was changed: {problem}", EXIT_REFUSED)
        log_path = None
        if log_dir is not None:
            log_path = os.path.abspath(log_dir)
        options = p.WrapOptions(
            clients.find_assay_script(),
            policy_path,
            log_path,
            observe=observe,
            hide_denied_tools=hide_denied_tools,
            declared_manifest=manifest_path,
            log_arguments=log_arguments,
        )

        def edit(text: str, loc: ConfigLocation, record: Sequence[p.model.EntryRecord] | None) -> p.Result:
            return p.protect_text(text, loc, options, record)

    try:
        outcome = p.apply_to_file(location.path, location, edit, dry_run=dry_run)
    except p.ProtectError as exc:
        return fatal(f"{location.path}: {exc}" if location.path not in str(exc) else str(exc), EXIT_REFUSED)

    result = outcome.result
    say(f"{info.display} config: {location.path}")
    if not result.changes:
        say(f"  no servers under {json.dumps(location.servers_key)}")
    for change in result.changes:
        where = f" ({change.where})" if change.where and change.where != location.servers_key else ""
        say(f"  {change.action:<9} {json.dumps(change.name, ensure_ascii=False)}{where}: {change.detail}")
    kept = [c for c in result.changes if c.action == "kept"]
    where = f" --config {location.path}" if config else f" --scope {scope}" if scope != "user" else ""
    if kept and not force:  # docs/protect.md, "Undo"
        say(
            f"--force unwraps the kept entries as they are now (the wrapping comes off, your edits stay): "
            f"assay mcp protect {client} --undo --force{where}"
        )
    if not result.changed:
        say("nothing to change")
        return 0
    if dry_run:
        try:  # header and env values are never shown (docs/protect.md, "Remote servers")
            sys.stdout.write(p.shown_diff(outcome.original, result.text, location, location.path))
        except p.ProtectError as exc:
            say(f"(the diff is not shown: {exc})")
        say("dry run: nothing was written")
        return 0
    if not undo and log_path is not None:
        try:
            os.makedirs(log_path, exist_ok=True)
        except OSError as exc:
            sys.stderr.write(f"warning: cannot create the log directory {log_path}: {exc.strerror or exc}\n")
    if undo and result.fallback:
        say(
            "no record of this file (protected by an older assay): only entries whose wrap line is exactly one "
            "protect writes or wrote were restored"
        )
    elif undo and any(c.forced for c in result.changes):
        say(
            "the original text of the restored entries is back, byte for byte, and the entries changed since "
            "protect are unwrapped as they are now; the rest of the file is as it was"
        )
    elif undo:
        say("the original text of the restored entries is back, byte for byte; the rest of the file is as it was")
    elif any(c.changed and c.remote for c in result.changes):  # docs/protect.md, "Remote servers"
        say(
            "only the servers above changed: a stdio server's command and args values, a remote server's whole "
            "entry (its URL, type and headers became command, args and env; its other members stay); "
            "the rest of the file is as it was"
        )
    else:
        say("only the command and args values of the servers above changed; the rest of the file is as it was")
    say(f"backup: {outcome.backup} (the first and the newest 5 of this file are kept)")
    if result.record is not None:
        say(
            f"record: {outcome.record_path}"
            if result.record
            else f"record: {outcome.record_path} (removed: nothing left to undo)"
        )
    say(f"wrote: {location.path}")
    if scope == "project" and config is None and not undo:
        say(
            "note: the project file now holds this machine's paths (assay, policy, log dir); "
            'a teammate needs the same paths, or runs protect on their machine (docs/protect.md, "Project scope")'
        )
    if undo:
        say(f"Restart {info.display} to run the servers without assay.")
    else:
        say(f"Restart {info.display} so it starts these servers through assay mcp wrap.")
        if log_path is not None:
            say(f"Decision logs: {log_path}/{location.client}-<server>.decisions.ndjson")
        say(f"Undo with: assay mcp protect {client} --undo{where}")
    return 0


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    mcp.command(protect_command, name="protect")
