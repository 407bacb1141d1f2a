"""`file:` URIs read the way the servers that open them read them (docs/policy.md, "file: URIs"):
assay's reading against the real parsers, over generated URIs.

The parsers: Node's `new URL` + `url.fileURLToPath` (tests/policy/url_oracle.mjs, one long-lived
child per module, one JSON line in and out per URI), and Python's `urllib`: `urlsplit` +
`unquote`, `urlparse` + `url2pathname`, `urlsplit` + `unquote_to_bytes` (a server that opens the
bytes). For every URI either assay refuses it, or every parser reads it as a `file:` URI and
yields the path assay judged (up to `.` segments and repeated slashes, which name the same file,
with no `..` left for the operating system to follow through a symlink). The same URIs go through
path confinement (a path argument), `resolve_symlinks` on a real tree with a symlink out of the
root, and `resources/read` under `resources.allow`/`deny`: what assay lets through, every parser
opens inside the root, and none of them names a denied file.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, unquote_to_bytes, urlparse, urlsplit
from urllib.request import url2pathname

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from assay.policy import evaluate, load_policy
from assay.policy.paths import PathRefused, confinement_violation, path_from_argument
from assay.session.requests import judge_request
from tests.policy._url_oracle import NodeReader, node_reader  # noqa: F401 (a fixture)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """ROOT/ws with a file, a directory, a file named secret and a symlink out of ws."""
    top = tmp_path_factory.mktemp("fileuri")
    (top / "ws" / "a").mkdir(parents=True)
    (top / "outside").mkdir()
    (top / "ws" / "b").write_text("b")
    (top / "ws" / "secret").write_text("s")
    os.symlink(top / "outside", top / "ws" / "link")
    return top


# -- the readers -------------------------------------------------------------------------------------


def python_readings(uri: str) -> dict[str, str | None]:
    """Each Python reading's path, None where that reader refuses the URI or reads no file: URI."""
    out: dict[str, str | None] = {}
    for name, split in (("urlsplit", urlsplit), ("urlparse", urlparse)):
        try:
            parts = split(uri)
        except ValueError:
            parts = None
        if parts is None or parts.scheme != "file":
            out[f"{name}+unquote"] = out[f"{name}+url2pathname"] = out[f"{name}+bytes"] = None
            continue
        for reader, read in (("unquote", unquote), ("url2pathname", url2pathname), ("bytes", _via_bytes)):
            try:
                out[f"{name}+{reader}"] = read(parts.path)
            except ValueError:  # a lone surrogate cannot be encoded: that reader opens nothing
                out[f"{name}+{reader}"] = None
        out[f"{name}+netloc"] = parts.netloc
    return out


def _via_bytes(path: str) -> str:
    return unquote_to_bytes(path).decode("utf-8", "surrogateescape")


def components(path: str) -> list[str]:
    return [c for c in path.split("/") if c not in ("", ".")]


# -- the generated URIs ------------------------------------------------------------------------------

SCHEMES = ["file:", "FILE:", "File:", "fi\tle:", "file\n:", " file:", "\x01file:", "fil\re:"]
HOSTS = [
    "",
    "localhost",
    "LOCALHOST",
    "LocalHost",
    "local\thost",
    "%6cocalhost",
    "\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54",
    "xn--ls8h",
    "m\u00fcnchen",
    "evil",
    "127.0.0.1",
    "[::1]",
    "C:",
    "C|",
    "host\\share",
    "user@localhost",
    "localhost:80",
    "localhost.",
    "local%68ost",
]
SEGMENTS = [
    "a",
    "b",
    "secret",
    "link",
    "",
    ".",
    "..",
    "%2e",
    "%2E%2e",
    ".%2e",
    "%2e.",
    "..\\x",
    ".\t.",
    ".\n.",
    ".\r.",
    "\\",
    "%2F",
    "%2f",
    "%5C",
    "%5c",
    "%00",
    "\x00",
    "%ff",
    "%c3%a9",
    "%C3%A9",
    "\u00e9",
    "%ed%a0%80",
    "%f4%90%80%80",
    "%c0%ae",
    "\ud800",
    "\udc80",
    "C:",
    "C|",
    "c%3A",
    "a b",
    " ",
    "%",
    "%zz",
    "%2",
    "%25",
    "%252e",
    "?q",
    "#f",
    "a;b",
    "~",
    "\x01",
    "\x7f",
    "\u2028",
    "a%20b",
    "{x}",
    "%3F",
    "%23",
    "\u017f",
    "%73ecret",
    "sec%72et",
    ".secret",
    "a\u200bb",
]
SEPARATORS = ["/", "/", "/", "\\", "//"]
TAILS = ["", "", "/", "?x", "#y", " ", "\t", "\x00", "\n", "%20", "?", "#"]


@st.composite
def file_uris(draw, root: str) -> str:
    scheme = draw(st.sampled_from(SCHEMES))
    form = draw(st.sampled_from(["authority", "authority", "slash", "bare"]))
    lead = {"authority": "//" + draw(st.sampled_from(HOSTS)), "slash": "", "bare": ""}[form]
    segments = draw(st.lists(st.one_of(st.sampled_from(SEGMENTS), st.text(max_size=4)), max_size=5))
    path = root if form != "bare" else root.lstrip("/")
    for segment in segments:
        path += draw(st.sampled_from(SEPARATORS)) + segment
    return scheme + lead + path + draw(st.sampled_from(TAILS))


ROOT_WS = "/ws"


def uris(root: str = ROOT_WS):
    return st.one_of(file_uris(root), st.builds(lambda s: "file:" + s, st.text(max_size=24)))


# -- the properties ----------------------------------------------------------------------------------


def check_agreement(node_reader: NodeReader, uri: str) -> str | None:
    """assay's path for `uri` (None: refused), after checking every parser against it."""
    node = node_reader.read(uri)
    python = python_readings(uri)
    try:
        judged = path_from_argument(uri)  # what path confinement and resources judge
    except PathRefused:
        return None
    # what Node reads as a file: URL, assay reads as one too, never as a relative file name
    assert not node["ok"] or judged != uri, (uri, node)
    assert judged.startswith("/"), uri
    assert node["ok"], (uri, judged, node)  # assay reads nothing Node refuses
    paths = {"node": node["path"]} | {k: v for k, v in python.items() if not k.endswith("+netloc")}
    for reader, path in paths.items():
        assert path is not None, (uri, reader, "reads no file: URI; assay read", judged)
        assert ".." not in path.split("/"), (uri, reader, path)
        assert components(path) == components(judged), (uri, reader, path, judged)
    for key in ("urlsplit+netloc", "urlparse+netloc"):
        assert python[key].lower() in ("", "localhost"), (uri, python[key])
    return judged


# the issue's own examples, and one of each refusal
ISSUE = [
    "file:///ws/..\\x\\y",
    "file:///ws/.\t./x",
    "file:///ws/.\n./x",
    "file:///ws/a%2Fb",
    "file:///ws/%5C..%5Cx",
    "file:///ws/%00",
    "file:///ws/%2e%2e/x",
    "file:///C:/x",
    "file:///C|/x",
    "file://host/share",
    "file:/ws/a",
    "file:ws/a",
    "FILE:///ws/a",
    "file://xn--ls8h/ws",
    "file://localhost/ws/a?q",
    "file:///ws/a#f",
    "file:///ws/%ff",
    "file:///ws/\ud800",
    " file:///ws/a",
    "file:///ws/a ",
    "fi\tle:///ws/a",
]


@settings(max_examples=500, deadline=None)
@given(uris())
@example(ISSUE[0])
def test_every_parser_that_accepts_a_uri_assay_admits_reads_the_path_assay_judged(node_reader, uri):
    check_agreement(node_reader, uri)


def test_the_issue_examples_are_read_alike_or_refused(node_reader):
    admitted = [uri for uri in ISSUE if check_agreement(node_reader, uri) is not None]
    assert admitted == ["file:/ws/a", "FILE:///ws/a", "fi\tle:///ws/a"]


@pytest.fixture(scope="module")
def confining(tree: Path):
    """A policy that confines every path argument and resource to ROOT/ws, symlinks resolved, and
    lets no resource named *secret* through."""
    root = tree / "ws"
    return load_policy(
        (
            f'version: "2.0"\ntools: {{allow: ["*"]}}\nenforcement: {{unconstrained_tools: allow}}\n'
            f'path_confinement: [{{tools: ["*"], args: [path], within: ["{root}"], resolve_symlinks: true}}]\n'
            f'resources: {{allow: ["file://{root}/*"], deny: ["*secret*"]}}\n'
        ).encode()
    )


@settings(max_examples=250, deadline=None)
@given(data=st.data())
def test_what_assay_confines_or_allows_every_parser_opens_inside_the_root(node_reader, tree, confining, data):
    root = str(tree / "ws")
    uri = data.draw(uris(root))
    as_argument = evaluate(confining, "read", {"path": uri}).outcome != "deny"
    lexical = confinement_violation(uri, within=[root]) is None
    resolving = confinement_violation(uri, within=[root], resolve_symlinks=True) is None
    request = judge_request(confining, {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri}})
    assert request is not None
    node = node_reader.read(uri)
    paths = [node["path"]] if node["ok"] else []
    paths += [p for k, p in python_readings(uri).items() if p is not None and not k.endswith("+netloc")]
    real_root = os.path.realpath(root)
    for path in paths:  # what each parser opens, for what assay let through
        inside = components(path)[: len(components(root))] == components(root) and ".." not in path.split("/")
        if lexical:
            assert inside, (uri, path)
        if resolving or as_argument or request.code is None:
            real = os.path.realpath(path)
            assert inside and (real == real_root or real.startswith(real_root + "/")), (uri, path, real)
        if request.code is None:
            assert "secret" not in path, (uri, path)
    if check_agreement(node_reader, uri) is None:  # refused by the reader: refused everywhere
        assert not (as_argument or lexical or resolving or request.code is None), uri
