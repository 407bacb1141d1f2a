"""`Mcp-Param-*` headers of 2026-07-28 calls (docs/remote.md, "Transports")."""

from __future__ import annotations

import base64

from hypothesis import given, settings
from hypothesis import strategies as st

from assay.shells.upstream_http.params import header_map, param_headers


def _prop(token, kind="string"):
    return {"type": kind, "x-mcp-header": token}


def test_marks_on_the_properties_chain_count():
    schema = {
        "type": "object",
        "properties": {
            "region": _prop("Region"),
            "opts": {"type": "object", "properties": {"tenant": _prop("Tenant", "integer")}},
            "plain": {"type": "string"},
        },
    }
    assert header_map(schema) == {("region",): "Region", ("opts", "tenant"): "Tenant"}


def test_one_invalid_mark_voids_them_all():
    good = {"region": _prop("Region")}
    for bad in (
        {"x": _prop("Bad Token")},
        {"x": _prop("region")},  # the same token without regard to case
        {"x": _prop("X", "number")},
        {"x": {"x-mcp-header": "X"}},  # no type
        {"x": _prop(7)},
    ):
        assert header_map({"type": "object", "properties": {**good, **bad}}) == {}
    off_chain = {"type": "object", "properties": good, "allOf": [{"properties": {"y": _prop("Y")}}]}
    assert header_map(off_chain) == {}
    assert header_map({"type": "string", "x-mcp-header": "Root"}) == {}
    # a value that looks like a mark inside `default` or `enum` is data, not a schema
    data = {"type": "object", "properties": good, "default": {"x-mcp-header": "Z"}}
    assert header_map(data) == {("region",): "Region"}


def test_values_are_rendered_as_the_clients_do():
    marks = {("region",): "Region", ("n",): "N", ("flag",): "Flag", ("deep", "t"): "T"}
    got = dict(param_headers(marks, {"region": "eu-wést", "n": 3, "flag": False, "deep": {"t": None}}))
    assert got["Mcp-Param-N"] == "3" and got["Mcp-Param-Flag"] == "false"
    assert base64.b64decode(got["Mcp-Param-Region"][len("=?base64?") : -2]).decode() == "eu-wést"
    assert "Mcp-Param-T" not in got  # null counts as absent
    assert param_headers(marks, "not an object") == []
    assert param_headers({("x",): "X"}, {"x": {"nested": 1}}) == []  # not a scalar


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda kids: (
            st.lists(kids, max_size=3)
            | st.dictionaries(
                st.sampled_from(["properties", "type", "x-mcp-header", "a", "allOf", "default"]), kids, max_size=4
            )
        ),
        max_leaves=30,
    )
)
def test_any_schema_gives_a_map_or_nothing(schema):
    marks = header_map(schema)
    assert all(isinstance(t, str) and p for p, t in marks.items())
