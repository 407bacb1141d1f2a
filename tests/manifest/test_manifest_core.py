"""Unit tests of the sans-IO manifest core and the create-new publisher (docs/manifest.md)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.manifest import (
    CANDIDATE_SCHEMA,
    ManifestError,
    build_candidate,
    parse_candidate,
    parse_declared,
    promote,
    render_document,
)
from assay.manifest.declared import construct_declared
from assay.manifest.digests import field_digest, field_digests, manifest_digest, tool_digest
from assay.manifest.files import read_bounded
from assay.manifest.observed import observed_document, parse_promotable_observed, sanitize_display
from assay.manifest.publish import PublishError, publish_new, publish_replace
from tests.manifest._fixtures import CANDIDATE_EXPECTED, OBSERVED_1440, SEARCH_DIGEST, dump, two_tool_doc

DEPLOY = {
    "name": "github.add_deploy_key",
    "description": "Add a deploy key",
    "inputSchema": {"type": "object", "required": ["owner", "repo"]},
}
SEARCH = {"name": "search", "description": "does a thing", "input_schema": {"type": "object"}}


# --- M1-M4 vectors -----------------------------------------------------------------------------


def test_tool_digest_vectors():
    assert tool_digest(DEPLOY) == "sha256:03c7e1d546c3440fb100938dcaa7578ac34ae81f28e5762e7f8a3197e272a9f6"
    assert tool_digest(SEARCH) == SEARCH_DIGEST


def test_manifest_digest_vectors_and_order_independence():
    a = ("github.add_deploy_key", tool_digest(DEPLOY))
    b = ("search", tool_digest(SEARCH))
    both = "sha256:f8a95098345d600f7a2d742c4e941ace5e9594918b2aa82a9a8f48f72f701ffa"
    assert manifest_digest([a, b]) == both
    assert manifest_digest([b, a]) == both
    assert manifest_digest([a]) == "sha256:d2f0835082d49b4fb9b304bc82163aa86f92102b42b0620e09e098ffad135172"
    assert manifest_digest([]) == "sha256:627e1dc38c487cf390939355265e37b1c2695afb313e46979bf7808e425d1dfb"


def test_field_digest_vectors():
    assert (
        field_digest("output_schema", None) == "sha256:6969128f97f2ae0b5576343b492d312e1ab80eedf990f4bba8366c4622e808b5"
    )
    assert field_digests(DEPLOY) == json.loads(OBSERVED_1440)["observed"]["tool_digests"][0]["field_digests"]


def test_tool_digest_projection_rules():
    """camelCase wins over snake_case; absent -> null; non-string name -> ""; floats like 1.0 -> 1."""
    assert tool_digest({**DEPLOY, "input_schema": {"ignored": True}}) == tool_digest(DEPLOY)
    assert tool_digest({"name": 7}) == tool_digest({"name": ""})
    assert tool_digest({"name": "x", "annotations": {"n": 1.0}}) == tool_digest({"name": "x", "annotations": {"n": 1}})


# --- producer: the observed document wrap writes (docs/manifest.md, "1. Get an observed manifest")


def test_producer_output_promotes_and_reproduces_the_vector():
    doc = observed_document("github", [SEARCH, DEPLOY])
    assert doc["status"] == "observed"
    assert (
        doc["observed"]["manifest_digest"] == "sha256:f8a95098345d600f7a2d742c4e941ace5e9594918b2aa82a9a8f48f72f701ffa"
    )
    cand = build_candidate(render_document(doc))
    assert [t["name"] for t in cand["tools"]] == ["github.add_deploy_key", "search"]


def test_producer_ambiguous_and_not_observed():
    dup = observed_document("s", [SEARCH, SEARCH])
    assert dup["status"] == "ambiguous" and dup["observed"]["manifest_digest"] is None
    assert len(dup["observed"]["tool_digests"]) == 2
    none = observed_document("s", None)
    assert none["status"] == "not_observed"
    assert none["observed"]["tools_list_complete"] == "unknown"
    assert none["observed"]["tool_digests"] == [] and none["observed"]["tool_count"] == 0
    partial = observed_document("s", [SEARCH], complete=False)
    with pytest.raises(ManifestError, match="complete, unambiguous tools/list"):
        build_candidate(render_document(partial))


def test_sanitised_names_cannot_reproduce_their_digest():
    doc = observed_document("srv\x1b", [{"name": "evil\x07tool"}, {"name": "tab\tok"}])
    names = [t["name"] for t in doc["observed"]["tool_digests"]]
    assert names == ["evil\ufffdtool", "tab\tok"]
    assert doc["server"]["id"] == "srv\ufffd"
    assert sanitize_display("a\x7fb\nc") == "a\ufffdb\nc"
    with pytest.raises(ManifestError, match="cannot be reproduced"):
        build_candidate(render_document(doc))


# --- candidate / promotion core ----------------------------------------------------------------


def test_build_candidate_reproduces_worked_example_bytes():
    assert render_document(build_candidate(OBSERVED_1440)) == CANDIDATE_EXPECTED


def test_promote_reads_source_only_after_candidate_checks():
    calls = []

    def load():
        calls.append(1)
        return OBSERVED_1440

    bad = CANDIDATE_EXPECTED.replace(b'"not_approved"', b'"approved"')
    with pytest.raises(ManifestError, match="non-approved candidate"):
        promote(bad, load)
    assert calls == []
    declared = promote(CANDIDATE_EXPECTED, load)
    assert calls == [1]
    assert declared["schema"] == "assay.declared_mcp_manifest.v0"


def test_trimming_uses_unicode_white_space_not_str_isspace():
    """M13.6: U+001F is not White_Space (Rust's trim keeps it), so such a name is non-empty."""
    doc = two_tool_doc()
    doc["observed"]["tool_digests"][0]["name"] = "\x1f"
    tools = doc["observed"]["tool_digests"]
    doc["observed"]["manifest_digest"] = manifest_digest((t["name"], t["tool_digest"]) for t in tools)
    assert build_candidate(dump(doc))["tools"][0]["name"] == "\x1f"


def test_shape_messages_name_the_place():
    doc = json.loads(OBSERVED_1440)
    doc["observed"]["tool_digests"][0]["privileged"] = 1
    with pytest.raises(ManifestError) as info:
        parse_promotable_observed(dump(doc))
    assert str(info.value) == "invalid type at $.observed.tool_digests[0].privileged: integer `1`, expected a boolean"
    doc = json.loads(OBSERVED_1440)
    doc["observed"]["tool_count"] = -1
    with pytest.raises(ManifestError, match="invalid value at \\$.observed.tool_count"):
        parse_promotable_observed(dump(doc))


# --- declared validator (M24) ------------------------------------------------------------------


def test_candidate_is_refused_as_a_declared_manifest():
    """M18: a candidate is not an approval; the declared loader refuses it."""
    with pytest.raises(ManifestError, match="unknown field"):
        parse_declared(CANDIDATE_EXPECTED)
    # with the candidate-only members removed, the schema check still refuses it
    cand = json.loads(CANDIDATE_EXPECTED)
    stripped = {k: cand[k] for k in ("schema", "canonicalization", "manifest_digest", "tools", "server")}
    with pytest.raises(
        ManifestError, match='schema must be assay.declared_mcp_manifest.v0, got "assay.mcp_manifest_candidate.v0"'
    ):
        parse_declared(dump(stripped))


def test_declared_round_trip_and_optional_members():
    declared = promote(CANDIDATE_EXPECTED, OBSERVED_1440)
    data = render_document(declared)
    assert parse_declared(data) == declared
    minimal = {
        "schema": "assay.declared_mcp_manifest.v0",
        "canonicalization": "assay.mcp_manifest_projection.v0",
        "manifest_digest": declared["manifest_digest"],
        "tools": [{"tool_digest": declared["tools"][0]["tool_digest"], "name": declared["tools"][0]["name"]}],
    }
    loaded = parse_declared(dump(minimal))
    assert loaded["server"] is None and loaded["note"] is None
    assert loaded["tools"][0]["privileged"] is None


def test_declared_tool_order_does_not_matter():
    declared = promote(*(lambda d: (render_document(build_candidate(d)), d))(dump(two_tool_doc())))
    declared["tools"].reverse()
    assert parse_declared(render_document(declared))["tools"][0]["name"] == "search"


def test_declared_field_digest_keys_checked_in_sorted_order():
    declared = promote(CANDIDATE_EXPECTED, OBSERVED_1440)
    declared["tools"][0]["field_digests"] = {"zzz": "sha256:" + "a" * 64, "annotations": "bad"}
    with pytest.raises(ManifestError, match='field_digest "annotations" must be'):
        parse_declared(render_document(declared))


def test_declared_utf8_message():
    with pytest.raises(ManifestError, match="declared manifest must be valid UTF-8"):
        parse_declared(b"\xff")


# --- bounded reads and publication -------------------------------------------------------------


def test_read_bounded_reads_at_most_limit_plus_one(tmp_path):
    """M26: a FIFO-free proof: a file of limit+1 bytes fails, limit bytes pass, for a small limit."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * 11)
    assert read_bounded(str(path), limit=11) == b"x" * 11
    with pytest.raises(ManifestError, match="exceeded source bytes limit of 10"):
        read_bounded(str(path), limit=10)


def test_read_bounded_refuses_an_endless_device():
    """/dev/zero never ends: not a regular file, refused before any read."""
    with pytest.raises(ManifestError, match=r"reading /dev/zero: not a regular file \(a character device\)"):
        read_bounded("/dev/zero")


def test_read_bounded_refuses_a_fifo_without_waiting(tmp_path):
    """A FIFO with no writer used to block the open forever; it is refused at once."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ManifestError, match=r"not a regular file \(a FIFO\)"):
        read_bounded(str(fifo))


def test_read_bounded_directory(tmp_path):
    with pytest.raises(ManifestError, match=r"not a regular file \(a directory\)"):
        read_bounded(str(tmp_path))


def test_publish_new_creates_exact_bytes_and_no_residue(tmp_path):
    target = tmp_path / "out.bin"
    publish_new(target, b"abc", mode=0o600)
    assert target.read_bytes() == b"abc"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert os.listdir(tmp_path) == ["out.bin"]
    with pytest.raises(PublishError, match="without overwriting an existing file: File exists"):
        publish_new(target, b"other")
    assert target.read_bytes() == b"abc"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_publish_new_write_failure_leaves_nothing(tmp_path):
    """A write that fails part-way (here: the file-size limit) leaves no temp and no output."""
    import resource
    import signal

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        with pytest.raises(PublishError, match="writing temporary output for"):
            publish_new(tmp_path / "big", b"x" * 10000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)
    assert os.listdir(tmp_path) == []


def test_publish_new_unwritable_directory(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(PublishError, match="creating temporary output beside"):
            publish_new(tmp_path / "x", b"x")
    finally:
        tmp_path.chmod(0o700)


def test_publish_replace_replaces_a_symlink_not_its_target(tmp_path):
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    link = tmp_path / "link"
    link.symlink_to(target)
    publish_replace(link, b"new")
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert target.read_bytes() == b"keep"
    assert sorted(os.listdir(tmp_path)) == ["link", "target"]


# --- properties --------------------------------------------------------------------------------

_names = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12).filter(
    lambda s: s.strip(
        " \t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
    )
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_tool = st.fixed_dictionaries(
    {"name": _names},
    optional={"description": st.text(max_size=20), "inputSchema": _json, "annotations": _json},
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_tool, min_size=1, max_size=6, unique_by=lambda t: t["name"]), st.text(max_size=10))
def test_property_observed_candidate_declared_round_trip(tools, server_id):
    """Any unambiguous tool list: producer -> candidate -> promote, deterministic, order-free digest."""
    source = render_document(observed_document(server_id, tools))
    cand = build_candidate(source)
    cand_bytes = render_document(cand)
    assert cand["schema"] == CANDIDATE_SCHEMA
    assert render_document(build_candidate(source)) == cand_bytes
    assert parse_candidate(cand_bytes) == cand
    declared = promote(cand_bytes, source)
    assert parse_declared(render_document(declared)) == declared
    reversed_source = render_document(observed_document(server_id, list(reversed(tools))))
    assert build_candidate(reversed_source)["manifest_digest"] == cand["manifest_digest"]
    assert (
        construct_declared(cand["canonicalization"], cand["manifest_digest"], cand["tools"], cand["server"]["id"])
        == declared
    )
