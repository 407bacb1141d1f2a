"""`assay mcp policy ...`: the policy command family (docs/policy-tools.md).

This module only makes the ``policy`` sub-app; each subcommand lives in its own module with a
``register(policy)`` function, listed in :data:`SUBCOMMANDS` (a new subcommand is a new module
and one entry there).
"""

from __future__ import annotations

import cyclopts

from assay.cli import policy_check, policy_explain, policy_suggest

SUBCOMMANDS = (policy_check, policy_explain, policy_suggest)


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    policy = cyclopts.App(name="policy", help="Check a policy file, explain its decisions, suggest one from the logs.", help_format="plaintext")
    mcp.command(policy)
    for sub in SUBCOMMANDS:
        sub.register(policy)
