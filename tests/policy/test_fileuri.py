"""The `file:` URI reader (docs/policy.md, "file: URIs"), in memory: what it reads, each spelling
it refuses and why, and the issue's escapes through path confinement (also with
`resolve_symlinks`) and `resources.allow`. tests/policy/test_fileuri_differential.py holds the
same reader against Node's and Python's parsers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import evaluate, load_policy
from assay.policy.fileuri import FileUriRefused, is_file_uri, read_file_uri
from assay.policy.paths import confinement_violation
from assay.session.requests import judge_request


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("file:///ws/a", "/ws/a"),
        ("file://localhost/ws/a", "/ws/a"),
        ("file://LocalHost/ws/a", "/ws/a"),
        ("FILE:///ws/a", "/ws/a"),
        ("file:/ws/a", "/ws/a"),
        ("file:////ws//a/./b/", "//ws//a/./b/"),
        ("file:///ws/a%20b%C3%A9%25", "/ws/a b\u00e9%"),
        ("file:///ws/%2e/a", "/ws/./a"),
        ("file:///ws/a%2e%2e", "/ws/a.."),
        ("file:///ws/%3F%23", "/ws/?#"),
        ("fi\tle:///ws/\na\rb", "/ws/ab"),  # tabs and newlines are removed by every URL parser
        ("file:///ws/a b\x01{}", "/ws/a b\x01{}"),
        ("file:///ws/c:x", "/ws/c:x"),
    ],
)
def test_read(uri: str, path: str) -> None:
    assert is_file_uri(uri)
    assert read_file_uri(uri) == path


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("file:///ws/..\\x\\y", "a backslash"),
        ("file:\\\\host\\share", "a backslash"),
        ("file:///ws/.\t./x", "a '..' segment"),
        ("file:///ws/.\n./x", "a '..' segment"),
        ("file:///ws/%2e%2E/x", "a '..' segment"),
        ("file:///ws/.%2e", "a '..' segment"),
        ("file:///ws/a/../b", "a '..' segment"),
        ("file:///ws/a%2Fb", "an encoded / or \\"),
        ("file:///ws/%2f..%2fx", "an encoded / or \\"),
        ("file:///ws/%5C..%5Cx", "an encoded / or \\"),
        ("file:///ws/%00", "embedded null byte"),
        ("file:///ws/a\x00b", "embedded null byte"),
        ("file:///ws/%ff", "invalid UTF-8"),
        ("file:///ws/%ed%a0%80", "invalid UTF-8"),  # an encoded surrogate
        ("file:///ws/%c0%ae", "invalid UTF-8"),  # an overlong '.'
        ("file:///ws/%zz", "a % not followed by two hex digits"),
        ("file:///ws/a%", "a % not followed by two hex digits"),
        ("file:///ws/\ud800", "a lone surrogate"),
        ("file:///ws/\udc80", "a lone surrogate"),
        ("file:///C:/x", "a Windows drive letter"),
        ("file:///C|/x", "a Windows drive letter"),
        ("file:///ws/c%7C/x", "a Windows drive letter"),
        ("file://C:/x", "naming another host"),
        ("file://host/share", "naming another host"),
        ("file://xn--ls8h/ws", "naming another host"),
        (
            "file://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/ws",
            "naming another host",
        ),  # IDNA maps it to localhost
        ("file://%6cocalhost/ws", "naming another host"),
        ("file://localhost:80/ws", "naming another host"),
        ("file://user@localhost/ws", "naming another host"),
        ("file://localhost", "must name an absolute path"),
        ("file:ws/a", "must name an absolute path"),
        ("file:", "must name an absolute path"),
        ("file:///ws/a?q", "query or fragment"),
        ("file:///ws/a#f", "query or fragment"),
        (" file:///ws/a", "at an end"),
        ("file:///ws/a ", "at an end"),
        ("file:///ws/a\x00", "at an end"),
        ("\x01file:///ws/a", "at an end"),
    ],
)
def test_refused(uri: str, why: str) -> None:
    assert is_file_uri(uri)
    with pytest.raises(FileUriRefused) as refused:
        read_file_uri(uri)
    assert why in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("value", "is_uri"),
    [
        ("file:x", True),
        ("FiLe:x", True),
        ("  file:x", True),
        ("\x00file:x", True),
        ("f\ti\nl\re:x", True),
        ("\t" * 100 + "file:x", True),
        ("/ws/file:x", False),
        ("files:x", False),
        ("ﬁle:x", False),
        ("f\x01ile:x", False),
        ("fıle:x", False),
        ("", False),
        ("file", False),
        ("./file:x", False),
    ],
)
def test_what_a_url_parser_reads_as_a_file_uri(value: str, is_uri: bool) -> None:
    assert is_file_uri(value) is is_uri


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_never_crashes_and_refuses_with_one_line(text: str) -> None:
    for uri in ("file:" + text, "file://" + text, "file:///" + text):
        try:
            path = read_file_uri(uri)
        except FileUriRefused as exc:
            assert str(exc) and "\n" not in str(exc)
        else:
            assert path.startswith("/") and ".." not in path.split("/")


# -- the escapes ----------------------------------------------------------------------------


ESCAPES = [
    "{ws}/..\\outside\\x",
    "{ws}/.\t./outside/x",
    "{ws}/.\n./outside/x",
    "{ws}/.\r./outside/x",
    "{ws}/%2e%2e/outside/x",
    "{ws}/link/../x",
]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x").write_text("outside")
    os.symlink(tmp_path / "outside" / "deeper", tmp_path / "ws" / "link")
    return tmp_path


@pytest.mark.parametrize("resolve", [False, True])
@pytest.mark.parametrize("escape", ESCAPES)
def test_escapes_do_not_pass_path_confinement(tree: Path, escape: str, resolve: bool) -> None:
    ws = tree / "ws"
    uri = "file://" + escape.format(ws=ws)
    why = confinement_violation(uri, within=[str(ws)], resolve_symlinks=resolve)
    assert why is not None and ("'..' segment" in why or "backslash" in why), why
    policy = load_policy(
        (
            'version: "2.0"\ntools: {allow: [read]}\nenforcement: {unconstrained_tools: allow}\n'
            f'path_confinement: [{{tools: [read], args: [path], within: ["{ws}"], resolve_symlinks: {str(resolve).lower()}}}]\n'
        ).encode()
    )
    assert evaluate(policy, "read", {"path": uri}).reason_code == "E_PATH_CONFINEMENT"
    resource = judge_request(policy, {"method": "resources/read", "params": {"uri": uri}})
    assert resource is not None and resource.code == "E_PATH_CONFINEMENT"


def test_a_path_argument_that_a_url_parser_reads_as_a_file_uri_is_judged_as_one() -> None:
    policy = load_policy(
        b'version: "2.0"\ntools: {allow: [read]}\nenforcement: {unconstrained_tools: allow}\n'
        b"path_confinement: [{tools: [read], args: [path], within: [/ws], base: /ws}]\n"
    )
    for value in ("fi\tle:///etc/passwd", "FILE:///etc/passwd", " file:///ws/a", "\x0bfile:///ws/a"):
        assert evaluate(policy, "read", {"path": value}).reason_code == "E_PATH_CONFINEMENT", value
    assert evaluate(policy, "read", {"path": "file%3A/etc/passwd"}).outcome == "allow"  # a relative file name
    assert evaluate(policy, "read", {"path": "file:/ws/a"}).outcome == "allow"
