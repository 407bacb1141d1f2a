"""`assay mcp tools`: list the tools of an MCP server, or of a client's servers, and what a
policy does with each (docs/tools.md). A thin layer over :mod:`assay.mcpclient`."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated, Literal

import cyclopts
from cyclopts import Parameter

from assay.cli import dash
from assay.cli.errors import Fatal, UsageError

if TYPE_CHECKING:
    from assay.mcpclient.report import Target


def _client_targets(words: tuple[str, ...], scope: str, config: str | None) -> list[Target]:
    from assay import clients
    from assay.discover.scan import read_config_file
    from assay.clients.configs import config_document
    from assay.mcpclient.launch import launches
    from assay.mcpclient.report import Target

    label = clients.resolve_client(words[0])
    assert label is not None
    if config is not None and not config.strip():
        raise UsageError("--config is empty; give the path of the client's config file")
    try:
        location = clients.pick_location(
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
    data = read_config_file(location.path)
    if data is None:
        raise Fatal(f"{location.path} does not exist, so {words[0]} has no servers to list")
    if isinstance(data, str):
        raise Fatal(f"{location.path}: {data}")
    found, errors = launches(data, location)
    if not found and errors and config_document(data, location)[0] is None:  # the file itself
        raise Fatal(f"{location.path}: {errors[0]}")
    for line in errors:
        sys.stderr.write(f"assay: {location.path}: {line}\n")
    if len(words) > 1:
        found = [f for f in found if f.name == words[1]]
        if not found:
            raise UsageError(f"{location.path} has no server named {words[1]!r}")
    from assay.clients.wrapped import parse_wrapped

    targets = []
    for f in found:
        wrapped = parse_wrapped(f.argv) if f.argv is not None else None
        server_label = str(wrapped.options.get("label", f.name)) if wrapped is not None else f.name
        targets.append(Target(f.name, server_label, f.argv, f.env, f.cwd, f.wrapped, f.skipped))
    return targets


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    @mcp.command(
        name="tools",
        usage="Usage: assay mcp tools [OPTIONS] -- <command> [args...]\n"
        "       assay mcp tools [OPTIONS] CLIENT [SERVER]",
    )
    def tools_command(
        *target: str,
        policy: Annotated[str | None, Parameter(name="--policy")] = None,
        json: Annotated[bool, Parameter(name="--json", negative=())] = False,
        timeout: Annotated[float, Parameter(name="--timeout")] = 30.0,
        label: Annotated[str, Parameter(name="--label")] = "default-mcp-server",
        scope: Annotated[Literal["user", "project"], Parameter(name="--scope")] = "user",
        config: Annotated[str | None, Parameter(name="--config")] = None,
    ) -> int:
        """List the tools an MCP server offers: names, titles, hints, arguments, and with --policy what the policy does with each.

        Exit codes: 0 every server listed (remote entries, and entries with a value only the client can fill in, skipped); 2 a server could not be listed, a policy or client config that cannot be read (fatal), or a usage error.

        Parameters
        ----------
        target
            -- <command> [args...] for one stdio server, or CLIENT [SERVER] for the servers of a client's config (claude, claude-code, cursor, vscode, windsurf, gemini, codex, zed).
        policy
            A policy file: say for each tool whether it is allowed, denied (and why), needs approval, has no schema, has confined path arguments.
        json
            One JSON object per tool per line.
        timeout
            Seconds each server has to answer everything (default 30).
        label
            The server label the policy sees for a command (wrap's --label; a client's entry uses its name, or its wrap line's --label).
        scope
            Which of the client's config files: user (default) or project.
        config
            Read this config file (in the client's format) instead of the client's usual one.
        """
        import functools

        import trio

        from assay import clients
        from assay.mcpclient.protocol import Listing, ListingError
        from assay.mcpclient.report import Target, render
        from assay.mcpclient.run import environment, list_tools

        if not target:
            raise UsageError("give a server command after -- or a client name: assay mcp tools -- <command> [args...]")
        if not timeout > 0 or timeout > 86400:
            raise UsageError(f"--timeout must be more than 0 and at most 86400 seconds, got {timeout:g}")
        loaded = None
        if policy is not None:
            from assay.cli.policy_check import load

            loaded = load(policy, False, lambda line: sys.stderr.write(line + "\n"))
        after_dash = dash.given(target)
        if after_dash or clients.resolve_client(target[0]) is None:
            if not after_dash and dash.AFTER is None:
                raise UsageError(
                    f"{target[0]!r} is not a client ({clients.client_names()}); "
                    "give a server command after --: assay mcp tools -- <command> [args...]"
                )
            targets = [Target(os.path.basename(target[0]) or target[0], label, tuple(target))]
        else:
            if len(target) > 2:
                raise UsageError("give a client and at most one server name: assay mcp tools CLIENT [SERVER]")
            targets = _client_targets(target, scope, config)

        failed = False
        for t in targets:
            result: Listing | ListingError | None = None
            if t.argv is not None and t.skipped is None:
                try:
                    result = trio.run(
                        functools.partial(list_tools, t.argv, env=environment(t.env), cwd=t.cwd, timeout=timeout)
                    )
                except ListingError as exc:
                    result = exc
                    failed = True
            out, err = render(t, result, loaded, json)
            sys.stdout.write("".join(line + "\n" for line in out))
            sys.stdout.flush()
            sys.stderr.write("".join(line + "\n" for line in err))
        return 2 if failed else 0
