"""The tracker's deny reason is the oracle's reason, then how the deny ends (docs/policy.md,
"How a deny ends"; assay.policy.flow_ends): the tests that compare the tracker with the oracle
read the reason with :func:`oracle_part`."""

from __future__ import annotations

import re

ENDING = re.compile(
    r"; it (ends once '.*' is called"
    r"|ends in \d+[hms]( \d+[ms])? \(.* after the latest '.*'\)(, or at once with `assay mcp session reset .*`)?"
    r"|holds for the rest of the agent session( \(a `for:` in the rule would end it by itself\))?; "
    r"`assay mcp session reset .*` clears it"
    r"|holds until this wrap ends( \(a `for:` in the rule would end it by itself\))?)",
    re.S,
)


def oracle_part(reason: str, expected: str) -> str:
    """``expected`` when ``reason`` is ``expected`` alone or followed by an ending; else
    ``reason`` (which then differs from ``expected``)."""
    if reason == expected:
        return reason
    if reason.startswith(expected) and ENDING.fullmatch(reason[len(expected) :]):
        return expected
    return reason
