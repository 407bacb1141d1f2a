"""The YAML examples of docs/policy.md, for tests that run exactly what the page shows.

An example is a ```yaml block whose first line is ``# example: <name>``. Tests load it with
:func:`policy_example` (the block's text) so a change to the page changes what they run.
"""

from __future__ import annotations

import re
from pathlib import Path

POLICY_PAGE = Path(__file__).resolve().parent.parent / "docs" / "policy.md"

_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.S | re.M)
_NAME = re.compile(r"#\s*example:\s*([A-Za-z0-9_.-]+)\s*$")


def policy_examples(page: Path = POLICY_PAGE) -> dict[str, str]:
    """name -> YAML text of every named example on the page (a name used twice is an error)."""
    out: dict[str, str] = {}
    for block in _BLOCK.findall(page.read_text(encoding="utf-8")):
        first = block.split("\n", 1)[0]
        m = _NAME.fullmatch(first.strip())
        if m is None:
            continue
        name = m.group(1)
        if name in out:
            raise ValueError(f"{page.name}: example {name!r} appears twice")
        out[name] = block
    return out


def policy_example(name: str) -> str:
    """The YAML text of the example ``name`` of docs/policy.md."""
    examples = policy_examples()
    if name not in examples:
        raise KeyError(f"docs/policy.md has no ```yaml block starting with '# example: {name}'")
    return examples[name]
