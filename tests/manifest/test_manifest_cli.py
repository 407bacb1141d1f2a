"""`assay mcp manifest candidate|promote` driven as a real process (docs/manifest.md; issue 7)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from assay.manifest import MAX_MANIFEST_BYTES
from tests.manifest._fixtures import (
    CANDIDATE_EXPECTED,
    OBSERVED_1440,
    assay,
    dump,
    listing,
    observed_doc,
    redigest,
    two_tool_doc,
)


def candidate(tmp_path: Path, source: bytes, out: str = "candidate.json"):
    (tmp_path / "observed.json").write_bytes(source)
    return assay("mcp", "manifest", "candidate", "--from-observed", "observed.json", "--out", out, cwd=tmp_path)


def assert_refused(res, fragment: str) -> None:
    stderr = res.stderr.decode()
    assert res.returncode == 2, stderr
    assert res.stdout == b""
    assert stderr.startswith("fatal: "), stderr
    assert stderr.count("\n") == 1, stderr  # one line (docs/manifest.md, "Rules for every file")
    assert fragment in stderr, stderr


# --- the worked example (1,440 observed bytes) ---------------------------------------------------


def test_worked_example_end_to_end(tmp_path):
    """The worked example: the 1,440 observed bytes give exactly the documented candidate, then the
    declared doc."""
    assert len(OBSERVED_1440) == 1440
    res = candidate(tmp_path, OBSERVED_1440)
    assert res.returncode == 0, res.stderr
    assert res.stdout == b""
    assert (tmp_path / "candidate.json").read_bytes() == CANDIDATE_EXPECTED
    assert (
        hashlib.sha256(OBSERVED_1440).hexdigest() == "61e2f26c7c0a5974bb9cdeca00cc0436c8b38f9ba347132e075b63618c75c894"
    )

    res = assay(
        "mcp",
        "manifest",
        "promote",
        "--candidate",
        "candidate.json",
        "--source",
        "observed.json",
        "--out",
        "declared.json",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout == b""
    declared_bytes = (tmp_path / "declared.json").read_bytes()
    declared = json.loads(declared_bytes)
    cand = json.loads(CANDIDATE_EXPECTED)
    assert list(declared) == ["schema", "canonicalization", "manifest_digest", "tools", "note", "server"]
    assert declared["schema"] == "assay.declared_mcp_manifest.v0"
    for key in ("canonicalization", "manifest_digest", "tools"):
        assert declared[key] == cand[key]
    assert declared["note"] is None
    assert declared["server"] == {"id": "github"}
    assert declared_bytes == (json.dumps(declared, indent=2) + "\n").encode()
    assert listing(tmp_path) == ["candidate.json", "declared.json", "observed.json"]


def test_output_is_deterministic(tmp_path):
    """M17/M23: same input bytes, identical output bytes."""
    source = tmp_path / "observed.json"
    source.write_bytes(dump(two_tool_doc()))
    outs = []
    for n in (1, 2):
        assert (
            assay(
                "mcp", "manifest", "candidate", "--from-observed", "observed.json", "--out", f"c{n}.json", cwd=tmp_path
            ).returncode
            == 0
        )
        assert (
            assay(
                "mcp",
                "manifest",
                "promote",
                "--candidate",
                f"c{n}.json",
                "--source",
                "observed.json",
                "--out",
                f"d{n}.json",
                cwd=tmp_path,
            ).returncode
            == 0
        )
        outs.append(((tmp_path / f"c{n}.json").read_bytes(), (tmp_path / f"d{n}.json").read_bytes()))
    assert outs[0] == outs[1]
    tools = json.loads(outs[0][0])["tools"]
    assert [t["name"] for t in tools] == ["github.add_deploy_key", "search"]  # sorted by name (docs/manifest.md)
    assert tools[1]["action_class"] is None and tools[1]["field_digests"] is None  # M16 nulls


# --- M9-M14 refusals, in the wording of the spec -----------------------------------------------


def _mutate(fn):
    doc = observed_doc()
    fn(doc)
    return dump(doc)


def _mutate_redigest(fn):
    doc = observed_doc()
    fn(doc)
    return dump(redigest(doc))


def _zero_tools(doc):
    doc["observed"]["tool_digests"] = []
    doc["observed"]["tool_count"] = 0
    doc["observed"]["privileged_tool_count"] = 0


def _sanitised_name(doc):
    """M6: digest over the raw name with a BEL, file shows U+FFFD: cannot reproduce (M13.7)."""
    tool = doc["observed"]["tool_digests"][0]
    raw = "github.add\x07deploy_key"
    from assay.manifest.digests import manifest_digest

    doc["observed"]["manifest_digest"] = manifest_digest([(raw, tool["tool_digest"])])
    tool["name"] = "github.add\ufffddeploy_key"


REFUSALS = {
    # M9
    "missing file": (None, "reading observed.json: No such file or directory"),
    # M10
    "not utf-8": (OBSERVED_1440.replace(b"github", b"git\xffhub", 1), "observed manifest must be valid UTF-8"),
    # M11
    "duplicate member": (
        OBSERVED_1440.replace(b'"status": "observed",', b'"status": "observed",\n  "status": "observed",'),
        "JSON object contains a duplicate member",
    ),
    "malformed": (OBSERVED_1440[:-3], "malformed JSON"),
    "bom": (b"\xef\xbb\xbf" + OBSERVED_1440, "malformed JSON"),
    "trailing data": (OBSERVED_1440 + b"{}", "malformed JSON"),
    "lone surrogate": (OBSERVED_1440.replace(b'"id": "github"', b'"id": "\\ud800"'), "malformed JSON"),
    # M12
    "unknown top-level member": (_mutate(lambda d: d.update(extra=1)), "unknown field"),
    "unknown tool member": (_mutate(lambda d: d["observed"]["tool_digests"][0].update(extra=1)), "unknown field"),
    "unknown server member": (_mutate(lambda d: d["server"].update(name="x")), "unknown field"),
    "missing server id": (_mutate(lambda d: d["server"].pop("id")), "missing field"),
    "missing privileged": (_mutate(lambda d: d["observed"]["tool_digests"][0].pop("privileged")), "missing field"),
    "float count": (OBSERVED_1440.replace(b'"tool_count": 1,', b'"tool_count": 1.0,'), "invalid type"),
    "string privileged": (_mutate(lambda d: d["observed"]["tool_digests"][0].update(privileged="yes")), "invalid type"),
    "field digest not a string": (
        _mutate(lambda d: d["observed"]["tool_digests"][0]["field_digests"].update(description=1)),
        "invalid type",
    ),
    # M13.1
    "ambiguous status": (
        _mutate(lambda d: d.update(status="ambiguous")),
        "source must be an observed assay.mcp_manifest_observed.v0 artifact",
    ),
    "other schema": (
        _mutate(lambda d: d.update(schema="assay.mcp_manifest_observed.v1")),
        "source must be an observed",
    ),
    # M13.2
    "partial list": (
        _mutate(lambda d: d["observed"].update(tools_list_complete="partial")),
        "observed source must carry one complete, unambiguous tools/list",
    ),
    "null digest": (_mutate(lambda d: d["observed"].update(manifest_digest=None)), "complete, unambiguous tools/list"),
    "absent digest": (_mutate(lambda d: d["observed"].pop("manifest_digest")), "complete, unambiguous tools/list"),
    "list not observed": (
        _mutate(lambda d: d["observed"].update(tools_list_observed=False)),
        "complete, unambiguous tools/list",
    ),
    # M13.3
    "canonicalization": (
        _mutate(lambda d: d["observed"].update(canonicalization="other.v0")),
        "observed source uses an unsupported canonicalization",
    ),
    # M13.4
    "zero tools": (_mutate_redigest(_zero_tools), "observed source must carry a non-empty, count-consistent tool list"),
    "count mismatch": (_mutate(lambda d: d["observed"].update(tool_count=2)), "non-empty, count-consistent tool list"),
    # M13.5
    "privileged count": (
        _mutate(lambda d: d["observed"].update(privileged_tool_count=0)),
        "observed source privileged_tool_count does not match its tools",
    ),
    # M13.6
    "blank name": (
        _mutate_redigest(lambda d: d["observed"]["tool_digests"][0].update(name="\u3000 \t")),
        "observed source tool names must be non-empty and unique",
    ),
    # M13.7
    "stale digest": (
        _mutate(lambda d: d["observed"].update(manifest_digest="sha256:" + "0" * 64)),
        "observed source manifest_digest cannot be reproduced from its serialized tool identities",
    ),
    "sanitised control-character name": (_mutate(_sanitised_name), "cannot be reproduced"),
    # M13.8
    "edited non-claim": (
        _mutate(lambda d: d["non_claims"].__setitem__(0, "judges everything")),
        "observed source non_claims do not match the observed-v0 contract",
    ),
    "missing non-claim": (_mutate(lambda d: d["non_claims"].pop()), "non_claims do not match"),
    # M14
    "uppercase tool digest": (
        _mutate_redigest(lambda d: d["observed"]["tool_digests"][0].update(tool_digest="sha256:" + "A" * 64)),
        'tool "github.add_deploy_key" tool_digest must be sha256: plus 64 lowercase hex, got "sha256:' + "A" * 64 + '"',
    ),
    "invented field digest key": (
        _mutate(lambda d: d["observed"]["tool_digests"][0]["field_digests"].update(schema="sha256:" + "a" * 64)),
        'tool "github.add_deploy_key" has unknown field_digest key "schema"',
    ),
    "short field digest": (
        _mutate(lambda d: d["observed"]["tool_digests"][0]["field_digests"].update(annotations="sha256:abc")),
        'tool "github.add_deploy_key" field_digest "annotations" must be sha256: plus 64 lowercase hex, got "sha256:abc"',
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_candidate_refusals(tmp_path, case):
    """M9-M14: each refusal exits 2 with its message; no output file and no temporary file."""
    source, fragment = REFUSALS[case]
    if source is None:
        res = assay(
            "mcp", "manifest", "candidate", "--from-observed", "observed.json", "--out", "candidate.json", cwd=tmp_path
        )
        before = []
    else:
        res = candidate(tmp_path, source)
        before = ["observed.json"]
    assert_refused(res, fragment)
    assert listing(tmp_path) == before


def test_duplicate_tool_names_refused(tmp_path):
    """M13.6: an exact duplicate name (as an ambiguous list would carry) is refused."""
    doc = observed_doc()
    doc["observed"]["tool_digests"].append(dict(doc["observed"]["tool_digests"][0]))
    doc["observed"]["tool_count"] = 2
    doc["observed"]["privileged_tool_count"] = 2
    res = candidate(tmp_path, dump(redigest(doc)))
    assert_refused(res, "observed source tool names must be non-empty and unique")


def test_refusal_order_first_check_wins(tmp_path):
    """M13 order: an ambiguous *and* partial source reports the status check."""
    doc = observed_doc()
    doc["status"] = "ambiguous"
    doc["observed"]["tools_list_complete"] = "partial"
    doc["non_claims"] = []
    assert_refused(candidate(tmp_path, dump(doc)), "source must be an observed")


def test_usage_errors_exit_2(tmp_path):
    for args in (
        ("candidate", "--out", "x"),
        ("candidate", "--from-observed", "x"),
        ("promote", "--candidate", "a", "--source", "b"),
    ):
        res = assay("mcp", "manifest", *args, cwd=tmp_path)
        assert res.returncode == 2
        assert res.stderr.decode().count("\n") == 1
    assert listing(tmp_path) == []


# --- M26-M27 byte ceiling ----------------------------------------------------------------------


def test_exactly_one_mebibyte_accepted_one_more_refused(tmp_path):
    """M26: 1,048,576 bytes (padded with trailing spaces) is accepted; 1,048,577 is refused."""
    exact = OBSERVED_1440 + b" " * (MAX_MANIFEST_BYTES - len(OBSERVED_1440))
    assert len(exact) == 1_048_576
    res = candidate(tmp_path, exact)
    assert res.returncode == 0, res.stderr
    cand = json.loads((tmp_path / "candidate.json").read_bytes())
    assert cand["source_sha256"] == "sha256:" + hashlib.sha256(exact).hexdigest()

    over = tmp_path / "over"
    over.mkdir()
    res = candidate(over, exact + b" ")
    assert_refused(
        res, "reading observed.json within the 1048576-byte manifest limit: exceeded source bytes limit of 1048576"
    )
    assert listing(over) == ["observed.json"]


def test_oversized_candidate_and_source_refused_by_promote(tmp_path):
    assert candidate(tmp_path, OBSERVED_1440).returncode == 0
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_MANIFEST_BYTES + 1))
    res = assay(
        "mcp",
        "manifest",
        "promote",
        "--candidate",
        "big.json",
        "--source",
        "observed.json",
        "--out",
        "d.json",
        cwd=tmp_path,
    )
    assert_refused(res, "reading big.json within the 1048576-byte manifest limit")
    res = assay(
        "mcp",
        "manifest",
        "promote",
        "--candidate",
        "candidate.json",
        "--source",
        "big.json",
        "--out",
        "d.json",
        cwd=tmp_path,
    )
    assert_refused(res, "reading big.json within the 1048576-byte manifest limit")
    assert not (tmp_path / "d.json").exists()


def test_oversized_output_refused_before_creation(tmp_path):
    """M27: a source under the ceiling whose candidate would exceed it creates nothing.

    Compact input (no indentation) with many tools pretty-prints to more than 1 MiB.
    """
    from assay.manifest.observed import observed_document

    tools = [{"name": f"t{i:05d}", "description": "d", "inputSchema": {"type": "object"}} for i in range(1850)]
    doc = observed_document("big", tools)
    compact = json.dumps(doc, separators=(",", ":")).encode()
    assert len(compact) <= MAX_MANIFEST_BYTES
    res = candidate(tmp_path, compact)
    assert_refused(res, "serialized output for candidate.json exceeds the 1048576-byte manifest limit")
    assert listing(tmp_path) == ["observed.json"]


# --- M28 create-new ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "directory", "symlink", "dangling symlink"])
@pytest.mark.parametrize("command", ["candidate", "promote"])
def test_existing_output_is_never_touched(tmp_path, kind, command):
    """M28: any existing name at --out is refused and left exactly as it was; no residue."""
    (tmp_path / "observed.json").write_bytes(OBSERVED_1440)
    (tmp_path / "candidate.json").write_bytes(CANDIDATE_EXPECTED)
    target = tmp_path / "target"
    target.write_bytes(b"keep me\n")
    out = tmp_path / "out.json"
    if kind == "file":
        out.write_bytes(b"existing\n")
    elif kind == "directory":
        out.mkdir()
        (out / "inner").write_bytes(b"x")
    elif kind == "symlink":
        out.symlink_to(target)
    else:
        out.symlink_to(tmp_path / "nowhere")
    before = {p.name: (os.lstat(p).st_mtime_ns, os.lstat(p).st_ino) for p in tmp_path.iterdir()}
    if command == "candidate":
        res = assay(
            "mcp", "manifest", "candidate", "--from-observed", "observed.json", "--out", "out.json", cwd=tmp_path
        )
    else:
        res = assay(
            "mcp",
            "manifest",
            "promote",
            "--candidate",
            "candidate.json",
            "--source",
            "observed.json",
            "--out",
            "out.json",
            cwd=tmp_path,
        )
    assert_refused(res, "creating out.json without overwriting an existing file: File exists")
    after = {p.name: (os.lstat(p).st_mtime_ns, os.lstat(p).st_ino) for p in tmp_path.iterdir()}
    assert after == before
    assert target.read_bytes() == b"keep me\n"
    if kind == "file":
        assert out.read_bytes() == b"existing\n"
    if kind == "dangling symlink":
        assert not (tmp_path / "nowhere").exists()


def test_identical_bytes_are_not_overwritten_either(tmp_path):
    assert candidate(tmp_path, OBSERVED_1440).returncode == 0
    res = assay(
        "mcp", "manifest", "candidate", "--from-observed", "observed.json", "--out", "candidate.json", cwd=tmp_path
    )
    assert_refused(res, "without overwriting an existing file")


def test_missing_output_directory(tmp_path):
    res = candidate(tmp_path, OBSERVED_1440, out="no/such/dir/candidate.json")
    assert_refused(res, "creating temporary output beside no/such/dir/candidate.json: No such file or directory")
    assert listing(tmp_path) == ["observed.json"]


def test_output_without_parent_goes_to_cwd(tmp_path):
    res = candidate(tmp_path, OBSERVED_1440, out="plain.json")
    assert res.returncode == 0
    assert listing(tmp_path) == ["observed.json", "plain.json"]


# --- M19-M23 promotion -------------------------------------------------------------------------


def promote(tmp_path: Path, source: str = "observed.json", cand: str = "candidate.json", out: str = "declared.json"):
    return assay("mcp", "manifest", "promote", "--candidate", cand, "--source", source, "--out", out, cwd=tmp_path)


def test_byte_identical_source_at_another_path_is_accepted(tmp_path):
    assert candidate(tmp_path, OBSERVED_1440).returncode == 0
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "copy.json").write_bytes(OBSERVED_1440)
    res = promote(tmp_path, source="elsewhere/copy.json")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "declared.json").exists()


@pytest.mark.parametrize("change", ["appended newline", "one byte changed", "reformatted"])
def test_source_drift_is_refused(tmp_path, change):
    """M22: any byte change to the source changes source_sha256 and is refused."""
    assert candidate(tmp_path, OBSERVED_1440).returncode == 0
    if change == "appended newline":
        drifted = OBSERVED_1440 + b"\n"
    elif change == "one byte changed":
        drifted = OBSERVED_1440.replace(b'"id": "github"', b'"id": "gitHub"')
    else:
        drifted = json.dumps(json.loads(OBSERVED_1440)).encode()
    assert drifted != OBSERVED_1440
    (tmp_path / "drifted.json").write_bytes(drifted)
    res = promote(tmp_path, source="drifted.json")
    assert_refused(res, "candidate does not match the exact observed source bytes")
    assert not (tmp_path / "declared.json").exists()


def test_candidate_whitespace_and_member_order_edits_are_tolerated(tmp_path):
    """M22 is semantic: a re-indented candidate with members reordered still promotes."""
    assert candidate(tmp_path, OBSERVED_1440).returncode == 0
    cand = json.loads(CANDIDATE_EXPECTED)
    reordered = dict(reversed(list(cand.items())))
    reordered["tools"] = [dict(reversed(list(t.items()))) for t in cand["tools"]]
    (tmp_path / "edited.json").write_text(json.dumps(reordered, indent=7))
    res = promote(tmp_path, cand="edited.json")
    assert res.returncode == 0, res.stderr


def _edit_candidate(fn) -> bytes:
    doc = json.loads(CANDIDATE_EXPECTED)
    fn(doc)
    return json.dumps(doc, indent=2).encode()


PROMOTE_REFUSALS = {
    "not utf-8": (CANDIDATE_EXPECTED.replace(b"github", b"git\xffhub", 1), "candidate must be valid UTF-8"),
    "duplicate member": (
        CANDIDATE_EXPECTED.replace(b'"status": "candidate",', b'"status": "candidate",\n  "status": "candidate",'),
        "JSON object contains a duplicate member",
    ),
    "malformed": (CANDIDATE_EXPECTED[:10], "malformed JSON"),
    "unknown member": (_edit_candidate(lambda d: d.update(approved_by="me")), "unknown field"),
    "unknown tool member": (_edit_candidate(lambda d: d["tools"][0].update(note="x")), "unknown field"),
    "approved": (
        _edit_candidate(lambda d: d.update(approval="approved")),
        "candidate status does not describe a non-approved candidate",
    ),
    "status": (
        _edit_candidate(lambda d: d.update(status="declared")),
        "candidate status does not describe a non-approved candidate",
    ),
    "schema": (
        _edit_candidate(lambda d: d.update(schema="assay.declared_mcp_manifest.v0")),
        "candidate status does not describe a non-approved candidate",
    ),
    "non_claims": (
        _edit_candidate(lambda d: d["non_claims"].pop()),
        "candidate non_claims do not match the closed candidate contract",
    ),
    "source_sha256 syntax": (
        _edit_candidate(lambda d: d.update(source_sha256="sha256:ABC")),
        "candidate source_sha256 is not canonical sha256",
    ),
    "source_sha256 changed": (
        _edit_candidate(lambda d: d.update(source_sha256="sha256:" + "0" * 64)),
        "candidate does not match the exact observed source bytes",
    ),
    "privileged dropped": (
        _edit_candidate(lambda d: d["tools"][0].pop("privileged")),
        "candidate does not match the exact observed source bytes",
    ),
    "action class edited": (
        _edit_candidate(lambda d: d["tools"][0].update(action_class=None)),
        "candidate does not match",
    ),
    "tool renamed": (
        _edit_candidate(lambda d: d["tools"][0].update(name="github.other")),
        "manifest_digest does not recompute from the declared tools",
    ),
    "tool digest edited": (
        _edit_candidate(lambda d: d["tools"][0].update(tool_digest="sha256:" + "c" * 64)),
        "manifest_digest does not recompute",
    ),
    "canonicalization": (
        _edit_candidate(lambda d: d.update(canonicalization="x")),
        'canonicalization must be assay.mcp_manifest_projection.v0, got "x"; a digest is only comparable to one computed the same way',
    ),
    "manifest digest syntax": (
        _edit_candidate(lambda d: d.update(manifest_digest="sha256:")),
        'manifest_digest must be sha256: plus 64 lowercase hex, got "sha256:"',
    ),
    "no tools": (_edit_candidate(lambda d: d.update(tools=[])), "tools must be a non-empty array"),
    "blank name": (_edit_candidate(lambda d: d["tools"][0].update(name=" ")), "every tool must have a non-empty name"),
    "duplicate name": (
        _edit_candidate(lambda d: d["tools"].append(dict(d["tools"][0]))),
        'duplicate tool name "github.add_deploy_key" (an approval baseline must be unambiguous)',
    ),
}


@pytest.mark.parametrize("case", list(PROMOTE_REFUSALS))
def test_promote_refusals(tmp_path, case):
    """M19-M22 and M24 through promotion: exit 2, the message, no declared file."""
    data, fragment = PROMOTE_REFUSALS[case]
    (tmp_path / "observed.json").write_bytes(OBSERVED_1440)
    (tmp_path / "candidate.json").write_bytes(data)
    res = promote(tmp_path)
    assert_refused(res, fragment)
    assert listing(tmp_path) == ["candidate.json", "observed.json"]


def test_promote_checks_candidate_before_reading_source(tmp_path):
    """M19-M21 order: a broken candidate is reported even when the source is missing."""
    (tmp_path / "candidate.json").write_bytes(_edit_candidate(lambda d: d.update(approval="approved")))
    assert_refused(promote(tmp_path, source="missing.json"), "candidate status does not describe")
    (tmp_path / "candidate.json").unlink()
    (tmp_path / "candidate.json").write_bytes(CANDIDATE_EXPECTED)
    assert_refused(promote(tmp_path, source="missing.json"), "reading missing.json: No such file or directory")


def test_promote_rebuild_refusals_surface_source_messages(tmp_path):
    """M21: the source is checked exactly like `candidate` does (any M10-M14 message)."""
    (tmp_path / "candidate.json").write_bytes(CANDIDATE_EXPECTED)
    (tmp_path / "observed.json").write_bytes(_mutate(lambda d: d.update(status="ambiguous")))
    assert_refused(promote(tmp_path), "source must be an observed")


def test_declared_output_is_not_a_candidate(tmp_path):
    """M18 the other way round: a declared document cannot be promoted again as a candidate."""
    assert candidate(tmp_path, OBSERVED_1440).returncode == 0
    assert promote(tmp_path).returncode == 0
    res = promote(tmp_path, cand="declared.json", out="again.json")
    assert_refused(res, "unknown field")
