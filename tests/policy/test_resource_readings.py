"""`resources.allow`/`deny` match the resource a URI names, not only its spelling (docs/policy.md,
"Resources and prompts"): each reading of a URI, a deny of any reading winning, the allow list
matching every reading; the readings as the URL standard makes them, checked against Node's
`new URL`."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import unquote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from assay.policy import load_policy
from assay.policy.inspecting import ListRules
from assay.policy.urinames import readings, standard_reading
from assay.session.requests import judge_request
from tests.docs_examples import policy_example
from tests.policy._url_oracle import NodeReader, node_reader  # noqa: F401 (a fixture)


def judge(policy, uri: str, method: str = "resources/read"):
    judged = judge_request(policy, {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"uri": uri}})
    assert judged is not None
    return judged


def rules(text: str):
    return load_policy(f'version: "2.0"\nresources: {text}\n'.encode())


# -- the docs' own example ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "code", "read_as"),
    [
        ("file:///workspace/%73ecret.txt", "E_RESOURCE_DENIED", "file:///workspace/secret.txt"),
        ("file:///workspace/SECRET.txt", None, None),  # patterns are case-sensitive, as they always were
        ("file://localhost/workspace/se%63ret", "E_RESOURCE_DENIED", "file://localhost/workspace/secret"),
        ("docs://%73ecret-plans", "E_RESOURCE_DENIED", "docs://secret-plans"),
        ("docs://x/%2e%2e/sec%72et", "E_RESOURCE_DENIED", "docs://x/../secret"),
        ("docs://x/sec\tret", "E_RESOURCE_DENIED", "docs://x/secret"),
        ("DOCS://readme", "E_RESOURCE_DENIED", "DOCS://readme"),  # the allow list must match it as written
        ("FILE:///workspace/a", "E_RESOURCE_DENIED", "FILE:///workspace/a"),
        ("file:///workspace/a%20b.txt", None, None),
        ("docs://readme", None, None),
    ],
)
def test_the_docs_example_judges_what_the_uri_names(uri: str, code: str | None, read_as: str | None) -> None:
    policy = load_policy(policy_example("resources").encode())
    judged = judge(policy, uri)
    assert judged.code == code, judged
    if read_as is not None:
        assert f"(read as {read_as!r})" in (judged.why or "") or read_as == uri


def test_the_issue_example_is_denied_by_the_docs_deny() -> None:
    policy = load_policy(policy_example("resources").encode())
    judged = judge(policy, "file:///workspace/%73ecret.txt")
    assert judged.code == "E_RESOURCE_DENIED"
    assert judged.why == (
        "resource 'file:///workspace/%73ecret.txt' (read as 'file:///workspace/secret.txt') is denied by resources.deny"
    )
    completion = judge_request(
        policy,
        {
            "method": "completion/complete",
            "params": {
                "ref": {"type": "ref/resource", "uri": "file:///workspace/%73ecret/{name}"},
                "argument": {"name": "name", "value": ""},
            },
        },
    )
    assert completion is not None and completion.code == "E_RESOURCE_DENIED"


# -- readings ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("docs://a", ("docs://a",)),
        ("docs://%73ecret", ("docs://%73ecret", "docs://secret")),
        ("docs://%2573", ("docs://%2573", "docs://%73")),  # decoded once, as a server decodes
        (
            "HTTPS://EVIL.com\\a\\..\\b?q=%41",
            ("HTTPS://EVIL.com\\a\\..\\b?q=%41", "HTTPS://EVIL.com\\a\\..\\b?q=A", "https://evil.com/b?q=A"),
        ),
        ("https:evil.com/x", ("https:evil.com/x", "https://evil.com/x")),
        ("http://%45vil.com/", ("http://%45vil.com/", "http://Evil.com/", "http://evil.com/")),
        ("Docs://Host/a/./b/%2E%2e/c", ("Docs://Host/a/./b/%2E%2e/c", "Docs://Host/a/./b/../c", "docs://Host/a/c")),
        ("docs:/a/../../b/.", ("docs:/a/../../b/.", "docs:/b/")),
        ("mailto:%41", ("mailto:%41", "mailto:A")),
        (" docs://a\t", (" docs://a\t", "docs://a")),
        ("FILE://localhost/ws/a/./", ("FILE://localhost/ws/a/./", "file:///ws/a/")),
        ("file:///ws/%73", ("file:///ws/%73", "file:///ws/s")),
        ("no scheme %41", ("no scheme %41", "no scheme A")),
        ("docs://%ff", ("docs://%ff", "docs://\ufffd")),
    ],
)
def test_readings(uri: str, expected: tuple[str, ...]) -> None:
    assert readings(uri) == expected


def test_a_deny_of_any_reading_wins_and_the_allow_list_must_match_every_reading() -> None:
    p = rules('{allow: ["https://api.example.com/*"], deny: ["https://api.example.com/admin*"]}')
    assert judge(p, "https://api.example.com/v1").code is None
    for uri in (
        "HTTPS://API.EXAMPLE.COM/admin",
        "https://api.example.com/v1/..%2F../admin",
        "https://api.example.com/v1/..%2F..%2Fadmin",
        "https://api.example.com/v1/%2e%2e/admin",
        "https:api.example.com/admin",
        "https://api.example.com\\admin",
        "https://api.%65xample.com/admin",
    ):
        assert judge(p, uri).code == "E_RESOURCE_DENIED", uri
    assert judge(p, "https://api.example.com/%2e%2e/%2e%2e/x/").code is None  # dot segments stop at the host
    assert "not in resources.allow" in (judge(p, "https://api.example.com.evil/x").why or "")
    why = judge(p, "https://api.example.com/%2e%2e/../admin").why
    assert why is not None and "read as" in why


def test_a_file_uri_servers_read_differently_is_refused_under_resources_alone() -> None:
    p = rules('{deny: ["*.env"]}')
    assert judge(p, "file:///ws/a").code is None
    judged = judge(p, "file:///ws/.env ")  # Node strips the space and opens .env
    assert judged.code == "E_RESOURCE_DENIED" and "not read the same way by every server" in (judged.why or "")
    assert judge(p, "file:///ws/%2Eenv").code == "E_RESOURCE_DENIED"
    assert judge(p, "file:///ws/x/..%5C.env").code == "E_RESOURCE_DENIED"


@pytest.mark.parametrize(
    "uri",
    [
        "file:///ws/..\\etc\\passwd",
        "file:///ws/.\t./etc/passwd",
        "file:///ws/.\n./etc/passwd",
        "file:///ws/%2e%2e/etc/passwd",
        "file:///ws/a/../../etc/passwd",
    ],
)
def test_the_issue_escapes_do_not_pass_resources_allow(uri: str) -> None:
    p = rules('{allow: ["file:///ws/*"]}')
    judged = judge(p, uri)
    assert judged.code == "E_RESOURCE_DENIED" and "not read the same way by every server" in (judged.why or ""), judged
    assert judge(p, "file:///ws/a").code is None


def test_records_show_the_reading_with_secrets_redacted() -> None:
    from assay.session.requests import decision_of

    p = rules('{deny: ["*token=*"]}')
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    judged = judge(p, "https://x.example/?%74oken=" + secret.replace("A", "%41"))
    assert judged.code == "E_RESOURCE_DENIED"
    decision = decision_of(p, judged)
    assert secret not in (decision.reason or "") and "read as" in (decision.reason or "")


# -- properties --------------------------------------------------------------------------------------

SCHEMES = st.sampled_from(["docs", "file", "https", "mcp", "ui", "x-y.z", "http", "s3"])
NAMES = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=16)


@st.composite
def denied_names(draw) -> str:
    scheme = draw(SCHEMES)
    if scheme == "file":
        segments = draw(
            st.lists(st.text(alphabet="abcdeé ~+-_.xyz0123", min_size=1, max_size=6), min_size=1, max_size=4)
        )
        return "file:///" + "/".join(segments)
    return scheme + ":" + draw(st.sampled_from(["//", "/", ""])) + draw(NAMES)


@st.composite
def percent_variant(draw, name: str) -> str:
    """`name` with any of its characters %-encoded (as UTF-8, in either case of hex); a `%`
    always, so the variant decodes to `name`."""
    out = []
    for char in name:
        if char == "%" or draw(st.booleans()):
            hexes = char.encode("utf-8").hex()
            hexes = hexes.upper() if draw(st.booleans()) else hexes
            out.append("".join("%" + hexes[i : i + 2] for i in range(0, len(hexes), 2)))
        else:
            out.append(char)
    return "".join(out)


@st.composite
def pattern_of(draw, name: str) -> str:
    """A pattern that matches `name`: the name, a prefix, a suffix or an infix."""
    i = draw(st.integers(0, len(name)))
    j = draw(st.integers(i, len(name)))
    form = draw(st.sampled_from(["exact", "prefix", "suffix", "infix"]))
    return {"exact": name, "prefix": name[:i] + "*", "suffix": "*" + name[j:], "infix": "*" + name[i:j] + "*"}[form]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_deny_of_a_name_holds_for_every_percent_encoding_of_it(data) -> None:
    name = data.draw(denied_names())
    variant = data.draw(percent_variant(name))
    pattern = data.draw(pattern_of(name))
    assert unquote(variant) == name
    judged = judge(replace(BASE, resources=ListRules(deny=(pattern,))), variant)
    assert judged.code == "E_RESOURCE_DENIED", (name, variant, pattern, judged)
    # and a name the allow list does not cover is refused in every spelling
    other = replace(BASE, resources=ListRules(allow=("zz-" + name,)))
    assert judge(other, variant).code == "E_RESOURCE_DENIED", (name, variant)


BASE = load_policy(b'version: "2.0"\n')


# -- the URL standard's reading, against Node ----------------------------------------------------------

HOSTS = st.sampled_from(["example.com", "EXAMPLE.com", "ex%41mple.com", "Api.Example.COM", "x", "a-b.c"])
SEGMENTS = st.sampled_from(
    [
        "a",
        "B",
        "",
        ".",
        "..",
        "%2e",
        "%2E%2e",
        ".%2e",
        "%41",
        "a b",
        "%25",
        "%2F",
        "\u00e9",
        "secret",
        "%73ecret",
        "x?y",
        "x#y",
        "\\",
        "~",
    ]
)


@st.composite
def standard_uris(draw) -> str:
    scheme = draw(st.sampled_from(["https", "HTTP", "wss", "ftp", "docs", "Docs", "mcp"]))
    slashes = draw(st.sampled_from(["//", "//", "/", "", "///", "\\\\"]))
    host = draw(HOSTS)
    path = "".join(draw(st.sampled_from(["/", "/", "\\"])) + s for s in draw(st.lists(SEGMENTS, max_size=5)))
    tail = draw(st.sampled_from(["", "?q=%41", "#f", "?a#b"]))
    return f"{scheme}:{slashes}{host}{path}{tail}"


@settings(max_examples=300, deadline=None)
@given(standard_uris())
@example("HTTPS://EVIL.com\\a\\..\\b?q=%41")
@example("docs://x/a/%2e%2e/b")
def test_the_standard_reading_is_what_node_reads(node_reader: NodeReader, uri: str) -> None:
    node = node_reader.read(uri)
    if "href" not in node:  # Node refuses it (a special scheme without a host): nothing to compare
        return
    ours, theirs = standard_reading(uri), unquote(node["href"], errors="replace")
    if ours != theirs and _pops_to_the_root(uri):
        # Node 20 leaves such a path empty where the standard writes "/": one slash apart
        (our_path, our_rest), (their_path, their_rest) = _split(ours), _split(theirs)
        assert our_rest == their_rest and our_path == their_path + "/", (uri, node["href"])
        return
    assert ours == theirs, (uri, node["href"])


def _split(uri: str) -> tuple[str, str]:
    """A URI's part before its query or fragment, and the rest."""
    cut = min((i for i in (uri.find("?"), uri.find("#")) if i >= 0), default=len(uri))
    return uri[:cut], uri[cut:]


def _pops_to_the_root(uri: str) -> bool:
    """Whether the path of a non-special URI ends in a `..` segment (`docs://h/a/../..`)."""
    last = _split(uri)[0].replace("\\", "/").rsplit("/", 1)[-1].lower()
    return not uri.lower().startswith(("http", "https", "wss", "ftp")) and last in ("..", ".%2e", "%2e.", "%2e%2e")
