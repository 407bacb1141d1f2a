"""The gateway's routing, in memory (assay/gateway/router.py; docs/serve.md, "Upstreams and the
agent session of a user")."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from assay.gateway.router import (
    Ids,
    Names,
    Route,
    UriBook,
    for_era,
    initialize_result,
    link_version,
    negotiate,
    route_of,
    target_of,
)

label = st.text(alphabet="abcdefghij_-", min_size=1, max_size=8)


@given(upstreams=st.lists(label, min_size=1, max_size=5, unique=True), tool=st.text(min_size=1, max_size=20))
def test_a_prefixed_name_splits_back_to_its_upstream_and_name(upstreams: list[str], tool: str) -> None:
    names = Names(tuple(upstreams), "__")
    for upstream in upstreams:
        split = names.split(names.join(upstream, tool))
        assert split is not None
        got, inner = split
        # the longest prefix wins: the name splits to an upstream whose join gives it back
        assert names.join(got, inner) == names.join(upstream, tool)
        assert len(got) >= len(upstream)


def test_names_split_by_the_longest_prefix_and_refuse_unknown_ones() -> None:
    names = Names(("a", "a__b"), "__")
    assert names.split("a__b__c") == ("a__b", "c")
    assert names.split("a__x") == ("a", "x")
    assert names.split("a__") is None and names.split("zz__x") is None and names.split(3) is None
    assert names.prefixed("tools/list", "a", [{"name": "t"}, {"no": "name"}, "junk"]) == [{"name": "a__t"}]
    assert names.prefixed("resources/list", "a", [{"uri": "x://1"}]) == [{"uri": "x://1"}]


def test_routes_and_targets() -> None:
    assert route_of("ping") is Route.LOCAL and route_of("tools/list") is Route.FANOUT
    assert route_of("tools/call") is Route.BY_NAME and route_of("resources/read") is Route.BY_URI
    assert route_of("completion/complete") is Route.BY_REF and route_of("nope") is Route.UNKNOWN
    names, uris = Names(("fs", "web")), UriBook()
    uris.learn("resources/list", "fs", [{"uri": "file:///a"}])
    uris.learn("resources/templates/list", "web", [{"uriTemplate": "https://x/{id}"}])
    assert target_of("tools/call", {"name": "fs__read", "arguments": {}}, names, uris) == (
        "fs",
        {"name": "read", "arguments": {}},
    )
    assert target_of("resources/read", {"uri": "file:///a"}, names, uris) == ("fs", {"uri": "file:///a"})
    assert target_of("resources/read", {"uri": "https://x/7"}, names, uris) == ("web", {"uri": "https://x/7"})
    assert isinstance(target_of("resources/read", {"uri": "file:///b"}, names, uris), str)
    ref = {"ref": {"type": "ref/prompt", "name": "web__p"}, "argument": {"name": "a", "value": ""}}
    assert target_of("completion/complete", ref, names, uris) == (
        "web",
        {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": ""}},
    )
    by_template = {"ref": {"type": "ref/resource", "uri": "https://x/{id}"}}
    assert target_of("completion/complete", by_template, names, uris) == ("web", by_template)
    assert isinstance(target_of("tools/call", {"name": "other__t"}, names, uris), str)


def test_ids_and_progress_tokens_map_back_to_whose_they_were() -> None:
    ids = Ids()
    p1, t1 = ids.map_token(1, {"_meta": {"progressToken": "same"}, "name": "x"})
    p2, t2 = ids.map_token(2, {"_meta": {"progressToken": "same"}})
    assert t1 != t2 and p1["_meta"]["progressToken"] == t1 and p1["name"] == "x"
    assert ids.progress({"progressToken": t2, "progress": 1}) == (2, {"progressToken": "same", "progress": 1})
    assert ids.progress({"progressToken": "same"}) is None
    assert ids.map_token(1, {"name": "x"}) == ({"name": "x"}, None)
    mine = ids.ask("fs", 5)
    assert ids.answered(mine) == ("fs", 5) and ids.answered(mine) is None


def test_initialize_and_eras() -> None:
    assert negotiate("2025-06-18") == "2025-06-18" and negotiate("1999-01-01") == "2025-11-25"
    assert negotiate("2026-07-28") == "2026-07-28" and link_version("2026-07-28") == "2025-11-25"
    result = initialize_result("2025-06-18")
    assert result["serverInfo"]["name"] == "assay-serve"
    assert all(result["capabilities"][k]["listChanged"] for k in ("tools", "resources", "prompts"))
    assert "completions" in result["capabilities"]
    assert for_era({"tools": []}, "tools/list", False) == {"tools": []}
    assert for_era({"tools": []}, "tools/list", True) == {
        "resultType": "complete",
        "tools": [],
        "ttlMs": 0,
        "cacheScope": "private",
    }


class _SmallBook(UriBook):
    LIMIT = 5
    MAX_CHARS = 100


@given(
    lists=st.lists(
        st.tuples(
            st.sampled_from(["resources/list", "resources/templates/list"]),
            st.sampled_from(["fs", "web"]),
            st.lists(st.text(max_size=60), max_size=8),
        ),
        max_size=12,
    )
)
def test_a_uri_book_is_bounded_in_entries_and_characters_and_keeps_the_latest(lists: list) -> None:
    # docs/serve.md, "Upstreams and the agent session of a user": a user's book cannot grow for ever
    book = _SmallBook()
    for method, upstream, uris in lists:
        key = "uri" if method == "resources/list" else "uriTemplate"
        book.learn(method, upstream, [{key: u} for u in uris])
        for held, chars in ((book.uris, book.uri_chars), (book.templates, book.template_chars)):
            assert len(held) <= 5 and chars == sum(len(k) + len(v) for k, v in held.items()) <= 100
        if uris:  # the last one listed is always routed
            assert (book.uris if key == "uri" else book.templates)[uris[-1]] == upstream


def test_upstream_requests_waiting_for_a_client_are_bounded_oldest_forgotten() -> None:
    ids = Ids()
    first = ids.ask("fs", "x" * 1000)
    mine = [ids.ask("fs", n) for n in range(Ids.ASKED_MAX)]
    assert len(ids.asked) == Ids.ASKED_MAX and ids.answered(first) is None and ids.asked_chars == 0
    assert ids.answered(mine[-1]) == ("fs", Ids.ASKED_MAX - 1)
    big = [ids.ask("web", "y" * (Ids.ASKED_CHARS_MAX // 4)) for _ in range(5)]
    assert ids.asked_chars <= Ids.ASKED_CHARS_MAX and ids.answered(big[0]) is None
    assert ids.answered(big[-1]) == ("web", "y" * (Ids.ASKED_CHARS_MAX // 4))
