"""A 2026-07-28 request's params as a link passes them to an upstream of the 2025 era
(docs/serve.md, "How a request flows"), against the MCP Python SDK's reading: for generated
``tools/call`` params, the SDK reads the params the upstream gets as the same tool, the same
arguments and the same progress token as the params the client sent, and the ``_meta`` the
upstream gets is the client's without the per-request ``io.modelcontextprotocol/`` members. So
the call assay judged is the call the upstream runs, and nothing of the 2026 envelope leaks."""

from __future__ import annotations

import copy
import json
from typing import Any

import mcp.types as sdk
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from assay.gateway.http import VERSION_META
from assay.serve.users import _for_link

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
meta_keys = st.sampled_from(
    [
        VERSION_META,
        "io.modelcontextprotocol/clientCapabilities",
        "io.modelcontextprotocol/clientInfo",
        "io.modelcontextprotocol/logLevel",
        "io.modelcontextprotocol/",
        "io.modelcontextprotocol",
        "IO.modelcontextprotocol/protocolVersion",
        "progressToken",
        "traceparent",
        "example.com/x",
    ]
) | st.text(max_size=12)
# a 2026-era _meta (its version member and maybe the others the spec names) with other members
metas = st.builds(
    lambda era, named, rest: {**rest, **named, **era},
    st.fixed_dictionaries({}, optional={VERSION_META: st.just("2026-07-28")}),
    st.fixed_dictionaries(
        {},
        optional={
            "io.modelcontextprotocol/clientCapabilities": st.just({}),
            "progressToken": st.integers(0, 9) | st.text(max_size=4),
            "traceparent": st.text(max_size=8),
        },
    ),
    st.dictionaries(meta_keys, json_values, max_size=4),
)
params = st.fixed_dictionaries(
    {
        "name": st.text(min_size=1, max_size=10),
        "arguments": st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    },
    optional={"_meta": metas | json_values},
)


def _read(p: dict[str, Any]) -> sdk.CallToolRequestParams | None:
    try:  # as the upstream's SDK reads the request it gets: from the JSON text
        return sdk.CallToolRequestParams.model_validate_json(json.dumps(p))
    except ValidationError:
        return None


@settings(max_examples=200, deadline=None)
@given(params)
def test_the_upstream_reads_the_call_the_client_sent(sent: dict[str, Any]) -> None:
    before = copy.deepcopy(sent)
    forwarded = _for_link(sent)
    assert sent == before  # the client's request is not changed in place
    client, upstream = _read(sent), _read(forwarded)
    if client is None:
        return  # the SDK refuses it (a _meta that is not an object): so does every peer
    assert upstream is not None
    assert (upstream.name, upstream.arguments) == (client.name, client.arguments)
    assert (upstream.meta or {}).get("progress_token") == (client.meta or {}).get("progress_token")
    meta = sent.get("_meta")
    if isinstance(meta, dict) and VERSION_META in meta:
        kept = {k: v for k, v in meta.items() if not k.startswith("io.modelcontextprotocol/")}
        assert forwarded.get("_meta", {}) == kept and ("_meta" in forwarded) == bool(kept)
        assert not any(k.startswith("io.modelcontextprotocol/") for k in forwarded.get("_meta", {}))
    else:  # a 2025-era request: passed as it came
        assert forwarded == sent
