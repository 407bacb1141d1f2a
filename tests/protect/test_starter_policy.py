"""The starter policy of `assay mcp protect --init-policy` (docs/protect.md, "The starter
policy"): it loads as wrap loads it, and the path check it teaches (path_confinement,
docs/policy.md "Path confinement") holds against a `..` escape once uncommented."""

from __future__ import annotations

import re

from assay.clients import protect as p
from assay.policy import evaluate, load_policy_file


def _uncommented(text: str) -> str:
    """The starter with its commented `schemas:` and `path_confinement:` blocks switched on."""
    out, live = [], False
    for line in text.splitlines():
        if re.match(r"# (schemas|path_confinement):", line):
            live = True
        if live and line.startswith("#"):
            line = line[2:] if line.startswith("# ") else ""
        out.append(line)
    return "\n".join(out) + "\n"


def test_the_starter_loads_and_allows_everything(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(p.STARTER_POLICY)
    policy = load_policy_file(str(path))
    assert evaluate(policy, "read_file", {"path": "/anything"}).outcome != "deny"


def test_the_starter_never_teaches_a_path_pattern():
    examples = p.STARTER_POLICY[p.STARTER_POLICY.index("# schemas:") :]
    assert "pattern:" not in examples and "path_confinement:" in examples


def test_the_path_check_it_teaches_denies_a_dotdot_escape(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(_uncommented(p.STARTER_POLICY))
    policy = load_policy_file(str(path))
    assert policy.path_confinement  # the block is live
    inside = evaluate(policy, "read_file", {"path": "/home/you/projects/app/README.md"})
    assert inside.outcome != "deny", inside.reason
    escape = evaluate(policy, "read_file", {"path": "/home/you/projects/../.ssh/id_rsa"})
    assert (escape.outcome, escape.reason_code) == ("deny", "E_PATH_CONFINEMENT")
    listing = evaluate(policy, "list_directory", {"path": "/etc"})
    assert listing.outcome == "deny"
