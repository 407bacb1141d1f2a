"""`assay mcp kill` (docs/kill.md) and its hidden deprecated flat form `assay kill` (docs/kill.md).

A thin layer over :mod:`assay.kill`. The shim runs the very same function after one stderr
warning line (docs/kill.md). `--capture-state`, `--output` and `--reason` did nothing upstream
and are not accepted (docs/kill.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Annotated, Literal

import cyclopts
from cyclopts import Parameter, Token

from assay.cli.errors import fatal

SHIM_WARNING = "warning: `assay kill` is deprecated; use `assay mcp kill` instead"


def _grace_converter(type_: type, tokens: Sequence[str | Token]) -> float:
    """Parse --grace in the parser, so a bad value is a usage error without the shim warning."""
    from assay.kill import parse_grace

    token = tokens[0]
    text = token if isinstance(token, str) else token.value
    try:
        return parse_grace(text)
    except ValueError as exc:
        raise ValueError(str(exc)) from None


def kill_command(
    targets: Annotated[tuple[str, ...], Parameter(show_default=False)] = (),
    /,
    *,
    all: Annotated[bool, Parameter(name="--all", negative=())] = False,
    yes: Annotated[bool, Parameter(name="--yes", negative=())] = False,
    inventory: Annotated[str, Parameter(name="--inventory")] = os.path.join(".assay", "inventory.yaml"),
    mode: Annotated[Literal["graceful", "immediate"], Parameter(name="--mode")] = "graceful",
    grace: Annotated[float, Parameter(name="--grace", converter=_grace_converter, show_default=lambda _: "5s")] = 5.0,
    kill_children: Annotated[bool, Parameter(name="--kill-children", negative=())] = False,
    force: Annotated[bool, Parameter(name="--force", negative=())] = False,
) -> int:
    """Stop running MCP server processes.

    Exit codes: 0 every kill succeeded; 30 a target was not killed (failed, refused, not found or unresolved); 2 usage errors.

    Parameters
    ----------
    targets
        proc-<pid>, <pid>, or a server id or name from the --inventory document.
    all
        Kill every running server of the inventory (requires --yes).
    yes
        Confirm --all.
    inventory
        A discover json/yaml document used to resolve ids and names.
    mode
        graceful (SIGTERM, then SIGKILL after --grace) or immediate (SIGKILL).
    grace
        How long graceful mode waits before SIGKILL: <n>ms, <n>s or <n> seconds.
    kill_children
        Also SIGKILL every descendant (collected before the parent is signalled).
    force
        Kill a pid even if it is not an MCP server process.
    """
    import trio

    from assay import kill as k

    if all and not yes:
        return fatal("Refusing to --all without --yes (safety).")
    if not all and not targets:
        return fatal("Provide at least one target, or use --all.")

    def out(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def err(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    async def main() -> int:
        return await k.run_kill(
            targets,
            all_=all,
            inventory_path=inventory,
            mode=mode,
            grace=grace,
            kill_children=kill_children,
            force=force,
            out=out,
            err=err,
            self_pid=os.getpid(),
        )

    try:
        return trio.run(main)
    except k.InventoryError as exc:
        return fatal(f"cannot load inventory: {exc}")


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    mcp.command(kill_command, name="kill")
    app.command(kill_command, name="kill", show=False)  # app.main prints SHIM_WARNING
