"""The rewrite of a line (docs/inspect.md, "Where wrap looks", "Rewriting"): each string token
whose text changed is replaced, every other byte kept, in memory that does not grow with a
string's length or its escapes (a hostile server sends megabytes of one string)."""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from assay.inspect.scan import splice

TOKEN = "ghp_" + "Ab3" * 12


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=6), st.integers(0, 5))
def test_splice_replaces_exactly_the_changed_strings(texts: list[str], which: int) -> None:
    value = {"content": [{"type": "text", "text": t} for t in texts], "n": 1.5e3}
    line = json.dumps(value).encode()
    old = texts[which % len(texts)]
    got = splice(line, {old: "[X]"})
    if got is None:  # no token was found to replace: never, for a string of the value
        raise AssertionError((line, old))
    want = {"content": [{"type": "text", "text": "[X]" if t == old else t} for t in texts], "n": 1.5e3}
    assert json.loads(got) == want


_MEASURE = """
import json, resource, sys
from assay.inspect.scan import splice
kind = sys.argv[1]
body = {"plain": "a" * 6_000_000, "escapes": "\\n" * 3_000_000, "mixed": "ab\\n" * 1_500_000}[kind]
secret = "ghp_" + "Ab3" * 12
line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [
    {"type": "text", "text": body}, {"type": "text", "text": "key " + secret}]}}).encode()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
got = splice(line, {"key " + secret: "key [REDACTED:github_token]"})
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert got is not None and secret.encode() not in got and json.loads(got)["result"]["content"][0]["text"] == body
print((after - before) // 1024)
"""


def test_splice_holds_no_memory_per_byte_or_escape_of_a_string() -> None:
    for kind in ("plain", "escapes", "mixed"):
        out = subprocess.run(
            [sys.executable, "-c", _MEASURE, kind], capture_output=True, text=True, check=True, timeout=120
        )
        grown = int(out.stdout.strip())
        assert grown < 48, (kind, grown)  # MiB: the copy of the line, not a stack per byte (700 MiB before)
