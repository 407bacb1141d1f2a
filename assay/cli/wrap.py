"""`assay mcp wrap [OPTIONS] -- <command> [args...]` (docs/wrap.md, "Options", "Command line").

This is the cyclopts command: help, and every command line the fast parser of
:mod:`assay.cli.wrap_args` leaves to it. Its parameters and its help text are built from the
one declaration of wrap's options (:class:`assay.wrap.options.WrapOptions`, through the table
:data:`~assay.wrap.options.WRAP_OPTIONS`) when the command tree is built; both parsers hand the
run to :func:`wrap_args.run`.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any

import cyclopts
from cyclopts import Parameter

from assay.cli import dash, wrap_args
from assay.cli.errors import UsageError
from assay.wrap import options


def _before_dash(command: tuple[str, ...], after: list[str]) -> None:
    """Refuse what cyclopts collected as the command beyond the words after ``--``: it came
    from before ``--``."""
    extra = list(command[: len(command) - len(after)]) if len(command) >= len(after) else list(command)
    if list(command[len(extra) :]) != after:
        extra = list(command)
    if not extra:
        return
    token = extra[0]
    if token.startswith("-"):
        raise UsageError(f"unknown option before --: {token} (see assay mcp wrap --help)")
    raise UsageError(f"unexpected argument before --: {token} (the server command goes after --)")


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    table = options.WRAP_OPTIONS

    def wrap_command(*command: str, **given: Any) -> int:
        values = {opt.param: given.get(opt.param, opt.default) for opt in table}
        after = dash.AFTER or []
        _before_dash(command, after)
        return wrap_args.run(values, after)

    signature, annotations = command_signature(table)
    wrap_command.__signature__ = signature  # type: ignore[attr-defined]
    wrap_command.__annotations__ = annotations
    wrap_command.__doc__ = help_text(table)
    mcp.command(wrap_command, name="wrap", usage=USAGE)


def parameter_of(opt: options.WrapOption) -> Parameter:
    """The cyclopts parameter of an option: its flag; a flag without a value has no ``--no-``
    form, and a repeatable option takes one value each time it is given."""
    if opt.kind is bool:
        return Parameter(name=opt.flag, negative="")
    if opt.kind is tuple:
        return Parameter(name=opt.flag, consume_multiple=False, negative="")
    return Parameter(name=opt.flag)


def command_signature(table: tuple[options.WrapOption, ...]) -> tuple[inspect.Signature, dict[str, Any]]:
    """The signature of the cyclopts command (the words after ``--``, then one keyword-only
    parameter per option, annotated with its type and :func:`parameter_of`, defaulting to its
    default) and the annotations cyclopts reads with it."""
    command = Annotated[str, Parameter(allow_leading_hyphen=True)]
    params = [inspect.Parameter("command", inspect.Parameter.VAR_POSITIONAL, annotation=command)]
    annotations: dict[str, Any] = {"command": command, "return": int}
    annotated: Any = Annotated  # (its arguments known only now)
    for opt in table:
        hint = annotated[opt.hint, parameter_of(opt)]
        params.append(
            inspect.Parameter(opt.param, inspect.Parameter.KEYWORD_ONLY, default=opt.default, annotation=hint)
        )
        annotations[opt.param] = hint
    return inspect.Signature(params, return_annotation=int), annotations


USAGE = "Usage: assay mcp wrap [OPTIONS] -- <command> [args...]\n       assay mcp wrap [OPTIONS] --url URL"
SUMMARY = "Wrap an MCP server (a command over stdio, or a remote one) and enforce a policy on its tool calls."
EXIT_CODES = (
    "Exit codes: the server's exit code; 128+N when wrap got signal N or the server died of it; "
    "2 usage and fatal errors; 3 a session report could not be written."
)
COMMAND_HELP = "The MCP server command and its arguments, after a literal --."


def help_text(table: tuple[options.WrapOption, ...] | None = None) -> str:
    """The command's docstring (what `assay mcp wrap --help` shows): each option's help from
    the table, in its order."""
    lines = [SUMMARY, "", EXIT_CODES, "", "Parameters", "----------", "command", f"    {COMMAND_HELP}"]
    for opt in options.WRAP_OPTIONS if table is None else table:
        lines += [opt.param, f"    {opt.help}"]
    return "\n".join(lines) + "\n"
