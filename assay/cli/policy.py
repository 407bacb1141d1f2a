"""`assay mcp policy ...`: the policy command family (docs/policy-tools.md).

This module only makes the ``policy`` sub-app; each subcommand lives in its own module with a
``register(policy)`` function, listed in :data:`SUBCOMMANDS` (a new subcommand is a new module
and one entry there).
"""

from __future__ import annotations

import cyclopts

from assay.cli import policy_check, policy_explain, policy_suggest

SUBCOMMANDS = (policy_check, policy_explain, policy_suggest)

# What a policy file says, in brief: the page a generated policy points to (a pipx or uv install
# has no docs/ directory). docs/policy.md is the full reference.
POLICY_HELP = """Check a policy file, explain its decisions, suggest one from the logs.

The policy file is YAML with version: "2.0". Its main keys:

tools.allow, tools.deny: lists of tool-name patterns. A pattern is a name as it is (read_file), prefix*, *suffix, *infix*, or * (every tool); "=name" is exactly that one name, whatever it holds ("=*" is the tool named *, "=x*" the tool named x*). A deny beats an allow; once tools.allow is present, every tool it does not match is denied.

tools.approval_required: patterns of tools whose every call a person approves through the client (MCP elicitation). tools.approval_fallback (deny, the default, or allow): what such a call gets when the client cannot ask a person (it declared no elicitation capability): deny refuses it (E_APPROVAL_DENIED, approval unavailable), allow lets it run unasked.

schemas.<tool>: a JSON Schema for the tool's arguments. enforcement.unconstrained_tools (warn, deny or allow): what a call of a tool without a schema gets.

path_confinement: rules {tools, args, within}: the named path arguments of those tools must lie inside one of the within directories (~ is your home directory).

Also: limits (rate limits), sequences and aliases (flow rules over a session's calls), inspect (what comes back), resources and prompts. assay mcp policy check FILE loads a file as wrap does and prints every warning; assay mcp policy explain FILE --tool NAME shows how one call is decided."""


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    policy = cyclopts.App(name="policy", help=POLICY_HELP, help_format="plaintext")
    mcp.command(policy)
    for sub in SUBCOMMANDS:
        sub.register(policy)
