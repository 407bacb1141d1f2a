"""What `assay mcp log` prints holds nothing a terminal or a JavaScript reader acts on
(docs/log.md, "--json"): DEL, C1 controls, bidi and other format controls, U+2028/U+2029 and
lone surrogates are written as ``\\uXXXX`` escapes in JSON lines and as escapes in the table,
and every JSON line reads as the same value in Python's json and in Node's JSON.parse
(differential, over generated names and reasons)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.logs.entries import Entry, parse_line
from assay.logs.view import Filter, Stats, Table, Viewer, json_line
from tests.conftest import ASSAY

T = "2026-08-22T10:15:02.123456+00:00"
# what a terminal or a JavaScript reader acts on, and what it hides: each must never be raw
HOSTILE = "\x7f\x85\x9b\u061c\u200b\u200e\u200f\u202a\u202e\u2066\u2069\u2028\u2029\ufeff\U000e0041\udcff\ud83d"


def event(raw: bool = False, **data) -> bytes:
    base = {
        "tool": "exec",
        "decision": "deny",
        "typed_decision": "deny",
        "reason_code": "P_POLICY_DENY",
        "error_code": "E_PATH_CONFINEMENT",
        "matched_rule": "path_confinement",
        "reason": "no",
        "session": None,
        "server": "shell",
        "request_id": 7,
    }
    doc = {
        "specversion": "1.0",
        "id": "evt_decision_1",
        "type": "assay.tool.decision",
        "source": "assay://protect/cursor/shell",
        "time": T,
        "data": {**base, **data},
    }
    if raw:  # UTF-8, as wrap writes a line without a lone surrogate
        return json.dumps(doc, ensure_ascii=False).encode()
    return json.dumps(doc).encode()  # ASCII escapes: a lone surrogate too, as wrap writes it


def _raw(text: str) -> list[str]:
    return [c for c in text if not c.isprintable()]


ENCODABLE = "".join(c for c in HOSTILE if not 0xD800 <= ord(c) <= 0xDFFF)


@pytest.mark.parametrize("hostile", [ENCODABLE, HOSTILE], ids=["utf8", "lone-surrogates"])
def test_json_lines_and_table_rows_escape_every_hostile_character(hostile):
    line = event(
        hostile == ENCODABLE,
        tool=f"t{hostile}",
        server=f"s{hostile}",
        reason=f"r{hostile}",
        arguments={f"k{hostile}": f"v{hostile}"},
    )
    entry = parse_line(line)
    assert isinstance(entry, Entry)  # a line with a lone surrogate is read (it was skipped)
    line = json_line(entry)
    assert _raw(line) == []
    doc = json.loads(line)
    assert (doc["tool"], doc["server"], doc["reason"]) == (f"t{hostile}", f"s{hostile}", f"r{hostile}")
    assert doc["arguments"] == {f"k{hostile}": f"v{hostile}"}
    for c in hostile:
        assert c not in line
    row = Table(None, False).row(entry)
    assert _raw(row) == []
    stats = Stats()
    stats.add(entry)
    for text in (*stats.lines(True), *stats.lines(False)):
        assert _raw(text) == []
    (first, *_), table = list(stats.lines(True)), list(stats.lines(False))
    assert json.loads(first)["tool"] == f"t{hostile}" and "\\u2028" in table[1]


@pytest.fixture(scope="module")
def node():
    """One Node process for the whole module: a JSON line in, JSON.stringify(JSON.parse(line))
    out (well-formed: a lone surrogate comes back as an escape)."""
    exe = shutil.which("node")
    if exe is None:
        pytest.skip("node is not installed")
    script = (
        "const rl = require('readline').createInterface({input: process.stdin});"
        "rl.on('line', l => { let out; try { out = JSON.stringify(JSON.parse(l)); }"
        " catch (e) { out = JSON.stringify({error: String(e)}); }"
        " process.stdout.write(out + '\\n'); });"
    )
    proc = subprocess.Popen([exe, "-e", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    yield proc
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


def _node_reads(node, line: str):
    node.stdin.write(line.encode("utf-8") + b"\n")
    node.stdin.flush()
    return json.loads(node.stdout.readline())


_names = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12) | st.sampled_from(
    [HOSTILE, "\u2028", "\x7f", "\x85", "\u202e", "\udcff", "a\x00b"]
)


@settings(max_examples=300, deadline=None)
@given(tool=_names, server=_names, reason=_names, key=_names)
def test_every_json_line_reads_the_same_in_python_and_node(node, tool, server, reason, key):
    entry = parse_line(event(tool=tool, server=server, reason=reason, arguments={key: reason}))
    assert isinstance(entry, Entry)
    for line in (json_line(entry), *(_stats_lines(entry))):
        assert _raw(line) == [], line
        assert "\n" not in line and "\r" not in line
        mine = json.loads(line)
        assert _node_reads(node, line) == mine
    doc = json.loads(json_line(entry))
    assert (doc["tool"], doc["server"], doc["reason"], doc["arguments"]) == (tool, server, reason, {key: reason})


def _stats_lines(entry: Entry) -> list[str]:
    stats = Stats()
    stats.add(entry)
    return list(stats.lines(True))


def test_the_command_prints_no_hostile_byte(tmp_path):
    """Through the real command: the bytes on stdout hold none of the characters' UTF-8 forms
    (nor DEL), with --json, --stats --json, and the table."""
    log = tmp_path / "d.ndjson"
    log.write_bytes(
        event(True, tool=f"t{ENCODABLE}", reason=f"r{ENCODABLE}")
        + b"\n"
        + event(tool=f"u{HOSTILE}", reason=f"r{HOSTILE}", request_id=8)
        + b"\n"
    )
    raw = [c.encode("utf-8", "surrogatepass") for c in HOSTILE]
    for args in (["--json"], ["--stats", "--json"], [], ["--stats"]):
        res = subprocess.run([str(ASSAY), "mcp", "log", *args, str(log)], capture_output=True, timeout=60)
        assert res.returncode == 0 and res.stderr == b"", res.stderr
        assert res.stdout.count(b"\n") >= 2
        for b in raw:
            assert b not in res.stdout, (args, b)


def test_the_viewer_holds_the_first_rows_bounded_in_bytes():
    """The rows held to fit the columns are written once they hold more than FIT_BYTES, not
    only after FIT_ROWS rows (a log of huge reasons)."""
    view = Viewer(Filter(), mode="table")
    big = parse_line(event(reason="r" * (1024 * 1024)))
    assert isinstance(big, Entry)
    shown = ""
    for _ in range(5):
        shown += view.take(big)
    assert shown.count("\n") == 1 + 5  # the header and the five rows: written before FIT_ROWS
