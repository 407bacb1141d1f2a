"""Path confinement (docs/policy.md, 'Path confinement'): the lexical normalizer, the policy key,
its place in the evaluation order, the shipped examples and the docs' own examples."""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import PolicyError, SessionState, evaluate, load_policy
from assay.policy.paths import PathRefused, confinement_violation, is_inside, normalize_path, path_from_argument

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "assay.yaml"
# examples/assay.yaml as shipped before path confinement existed
OLD_EXAMPLE = b"""version: "2.0"
tools: {allow: ["read_file", "list_dir"], deny: ["exec", "*delete*"]}
schemas:
  read_file: {type: object, additionalProperties: false, required: [path], properties: {path: {type: string, pattern: "^/workspace/"}}}
  list_dir: {type: object, additionalProperties: false, properties: {path: {type: string, pattern: "^/workspace"}}}
"""


def load(text: str):
    return load_policy(text.encode(), source="pol.yaml", home="/home/you")


CONFINED = load(
    'version: "2.0"\n'
    "tools: {allow: [read_file, list_dir, move_file, search, read_multiple_files], deny: [exec]}\n"
    "schemas:\n"
    "  read_file: {type: object, required: [path], properties: {path: {type: string}}}\n"
    "enforcement: {unconstrained_tools: warn}\n"
    "path_confinement:\n"
    "  - {tools: [read_file, 'list_*', read_multiple_files, exec], args: [path, paths], within: [/workspace, /srv/shared/]}\n"
    "  - {tools: [move_file], args: [source, destination], within: [/workspace], base: /workspace}\n"
)


def decide(path_args, tool="read_file", policy=CONFINED):
    return evaluate(policy, tool, path_args)


# --- the regression -----------------------------------------------------------------------------


def test_dotdot_escape_was_admitted_by_the_old_example_and_is_denied_now():
    old = load_policy(OLD_EXAMPLE)
    assert evaluate(old, "read_file", {"path": "/workspace/../etc/passwd"}).outcome == "allow"
    new = load_policy(EXAMPLE.read_bytes(), source="assay.yaml")
    assert new.warnings == ()
    d = evaluate(new, "read_file", {"path": "/workspace/../etc/passwd"})
    assert d.outcome == "deny" and d.reason_code == "E_PATH_CONFINEMENT"
    assert d.reason == (
        'Path argument "path" is not confined: "/workspace/../etc/passwd" (normalized "/etc/passwd") '
        "is outside /workspace"
    )
    assert d.contract == {
        "status": "deny",
        "error_code": "E_PATH_CONFINEMENT",
        "tool": "read_file",
        "argument": "path",
        "reason": d.reason,
    }
    assert d.event_reason_code == "P_POLICY_DENY" and d.typed_decision == "deny"
    assert d.matched_rule == "path_confinement" and d.policy_digest == new.digest
    for ok in ("/workspace/README.md", "/workspace", "/workspace/a/../b"):
        assert evaluate(new, "read_file", {"path": ok}).outcome == "allow", ok
    assert evaluate(new, "list_dir", {"path": "/workspace2"}).reason_code == "E_PATH_CONFINEMENT"
    assert evaluate(new, "list_dir", {}).outcome == "allow"  # absent: the server's default


@pytest.mark.parametrize(
    "value, why",
    [
        ("/workspace2/x", '"/workspace2/x" is outside /workspace, /srv/shared'),
        ("/workspace/../etc", '"/workspace/../etc" (normalized "/etc") is outside /workspace, /srv/shared'),
        ("/workspace/../workspace/a", "\"/workspace/../workspace/a\": '..' leaves /workspace on the way"),
        ("/../etc", "\"/../etc\": '..' climbs above /"),
        ("workspace/a", '"workspace/a": relative path and no base directory is configured'),
        ("~/secret", '"~/secret": home-relative paths (~) are not allowed'),
        ("", '"": empty path'),
        ("/workspace/a\x00b", '"/workspace/a\\u0000b": embedded null byte'),
        ("file:///etc/passwd", '"file:///etc/passwd" (normalized "/etc/passwd") is outside /workspace, /srv/shared'),
        (
            "file://evil.example/workspace/a",
            '"file://evil.example/workspace/a": a file: URI naming another host is not a local path',
        ),
        ("file:///workspace/a?x=1", '"file:///workspace/a?x=1": a file: URI with a query or fragment is not a path'),
        (5, "not a string"),
        (["/workspace/a", "/etc/x"], 'item 1: "/etc/x" is outside /workspace, /srv/shared'),
        ({"p": "/workspace"}, "not a string"),
    ],
)
def test_denials_name_the_argument_and_say_why(value, why):
    d = decide({"paths" if isinstance(value, list) else "path": value}, tool="list_dir")
    arg = "paths" if isinstance(value, list) else "path"
    assert d.reason_code == "E_PATH_CONFINEMENT"
    assert d.reason == f'Path argument "{arg}" is not confined: {why}'
    assert "\n" not in d.reason


@pytest.mark.parametrize(
    "value",
    [
        "/workspace",
        "/workspace/",
        "//workspace//a/./b",
        "/srv/shared/x",
        "file:///workspace/a",
        "file://localhost/workspace/a%20b",
        "FILE:/workspace/a",
        ["/workspace/a", "/srv/shared"],
        None,
    ],
)
def test_admitted(value):
    assert decide({"path": value}, tool="list_dir").outcome != "deny"


def test_relative_paths_resolve_against_base():
    ok = decide({"source": "a/b", "destination": "./c/../d"}, tool="move_file")
    assert ok.outcome != "deny"
    bad = decide({"source": "a", "destination": "../etc"}, tool="move_file")
    assert bad.reason_code == "E_PATH_CONFINEMENT" and bad.contract["argument"] == "destination"


def test_arguments_that_are_not_an_object_are_denied_for_a_confined_tool():
    assert decide(["/workspace"], tool="list_dir").reason_code == "E_PATH_CONFINEMENT"
    assert decide(None, tool="list_dir").outcome != "deny"  # no arguments: nothing to confine


# --- evaluation order ---------------------------------------------------------------------------


def test_order_deny_list_and_schema_come_first():
    assert decide({"path": "/etc"}, tool="exec").reason_code == "E_TOOL_DENIED"
    assert decide({"path": "/etc"}, tool="other").reason_code == "E_TOOL_NOT_ALLOWED"
    assert decide({"path": 5}).reason_code == "E_ARG_SCHEMA"  # schema before confinement
    assert decide({}).reason_code == "E_ARG_SCHEMA"
    assert decide({"path": "/etc"}).reason_code == "E_PATH_CONFINEMENT"
    assert decide({"path": "/workspace/a"}).outcome == "allow"


def test_a_tool_without_schema_is_confined_and_keeps_its_warning():
    d = decide({"path": "/etc"}, tool="list_dir")
    assert d.reason_code == "E_PATH_CONFINEMENT"
    ok = decide({"path": "/workspace"}, tool="list_dir")
    assert ok.outcome == "allow_with_warning" and ok.reason_code == "E_TOOL_UNCONSTRAINED"
    assert decide({"path": "/etc"}, tool="search").outcome == "allow_with_warning"  # no rule


def test_unconstrained_deny_wins_over_confinement():
    p = load(
        'version: "2.0"\nenforcement: {unconstrained_tools: deny}\n'
        "path_confinement: [{tools: ['*'], args: [path], within: [/w]}]\n"
    )
    assert evaluate(p, "t", {"path": "/etc"}).reason_code == "E_TOOL_UNCONSTRAINED"


def test_every_matching_rule_must_hold():
    p = load(
        'version: "2.0"\nenforcement: {unconstrained_tools: allow}\npath_confinement:\n'
        "  - {tools: ['fs_*'], args: [path], within: [/data]}\n"
        "  - {tools: [fs_write], args: [path], within: [/data/out]}\n"
    )
    assert evaluate(p, "fs_read", {"path": "/data/in/x"}).outcome == "allow"
    assert evaluate(p, "fs_write", {"path": "/data/in/x"}).reason_code == "E_PATH_CONFINEMENT"
    assert evaluate(p, "fs_write", {"path": "/data/out/x"}).outcome == "allow"


def test_rate_limits_and_counters_still_apply():
    p = load(
        'version: "2.0"\nlimits: {max_tool_calls_total: 1}\nenforcement: {unconstrained_tools: allow}\n'
        "path_confinement: [{tools: ['*'], args: [path], within: [/w]}]\n"
    )
    state = SessionState()
    assert evaluate(p, "t", {"path": "/etc"}, state).reason_code == "E_PATH_CONFINEMENT"
    assert evaluate(p, "t", {"path": "/w"}, state).reason_code == "E_RATE_LIMIT"


# --- symlinks -----------------------------------------------------------------------------------


def test_resolve_symlinks_sees_a_link_out_of_the_root(tmp_path):
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "secret").write_text("s")
    os.symlink(tmp_path / "secret", root / "link")
    text = (
        'version: "2.0"\nenforcement: {unconstrained_tools: allow}\npath_confinement:\n'
        f"  - {{tools: [r], args: [path], within: ['{root}'], resolve_symlinks: RS}}\n"
    )
    lexical, resolving = load(text.replace("RS", "false")), load(text.replace("RS", "true"))
    assert evaluate(lexical, "r", {"path": f"{root}/link"}).outcome == "allow"
    d = evaluate(resolving, "r", {"path": f"{root}/link"})
    assert d.reason_code == "E_PATH_CONFINEMENT" and "resolves outside" in d.reason
    assert evaluate(resolving, "r", {"path": f"{root}/sub/new-file"}).outcome == "allow"


def test_resolve_symlinks_follows_a_dotdot_after_a_link_as_the_kernel_does(tmp_path):
    """`ROOT/link/../x` with ROOT/link -> OUT/deeper: the lexical form is ROOT/x, but the kernel
    opens OUT/x. The resolving check resolves the path as written, not its normal form."""
    root, out = tmp_path / "ws", tmp_path / "out"
    (root / "sub").mkdir(parents=True)
    (out / "deeper").mkdir(parents=True)
    (out / "x").write_text("outside")
    (root / "x").write_text("inside")
    os.symlink(out / "deeper", root / "link")
    value = f"{root}/link/../x"
    assert Path(value).read_text() == "outside"  # what a server opens
    text = (
        'version: "2.0"\nenforcement: {unconstrained_tools: allow}\npath_confinement:\n'
        f"  - {{tools: [r], args: [path], within: ['{root}'], resolve_symlinks: true}}\n"
    )
    d = evaluate(load(text), "r", {"path": value})
    assert d.reason_code == "E_PATH_CONFINEMENT" and "resolves outside" in d.reason
    for inside in (f"{root}/sub/../x", f"{root}/x"):
        assert evaluate(load(text), "r", {"path": inside}).outcome == "allow", inside


# --- loading ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rules, kind, fragment",
    [
        (
            "[{tools: [a], args: [path], within: [relative]}]",
            "validation",
            "path_confinement[0].within[0] must be an absolute path",
        ),
        ("[{tools: [a], args: [path], within: ['/a/../..']}]", "validation", "'..' climbs above /"),
        ("[{tools: [a], args: [path], within: []}]", "validation", "within must list at least one entry"),
        ("[{tools: [], args: [path], within: [/a]}]", "validation", "tools must list at least one entry"),
        ("[{tools: [a], within: [/a]}]", "structure", "path_confinement[0]: missing field args"),
        ("[{tools: [a], args: [path], within: [/a], base: x}]", "validation", "base must be an absolute path"),
        ("[{tools: [a], args: [path], within: [/a], resolve_symlinks: yes}]", "structure", "expected a boolean"),
        ("{read_file: [path]}", "structure", "expected a list of rules"),
    ],
)
def test_bad_rules_are_refused_at_load(rules, kind, fragment):
    with pytest.raises(PolicyError) as info:
        load(f'version: "2.0"\npath_confinement: {rules}\n')
    assert info.value.kind == kind and fragment in str(info.value)
    assert str(info.value).startswith("pol.yaml: ")


def test_directories_are_normalized_and_unknown_keys_warned():
    p = load('version: "2.0"\npath_confinement: [{tools: [a], args: [p], within: ["//w/./x/"], extra: 1}]\n')
    assert p.path_confinement[0].within == ("/w/x",)
    assert p.warnings == ("unknown key ignored: path_confinement[0].extra",)


def test_digest_of_a_policy_without_confinement_is_unchanged():
    text = 'version: "2.0"\ntools: {allow: [a]}\n'
    p = load(text)
    assert "path_confinement" not in p.to_dict()
    with_rule = load(text + "path_confinement: [{tools: [a], args: [p], within: [/w]}]\n")
    assert with_rule.digest != p.digest
    assert with_rule.to_dict()["path_confinement"] == [
        {"tools": ["a"], "args": ["p"], "within": ["/w"], "base": None, "resolve_symlinks": False}
    ]


# --- the normalizer, as a property --------------------------------------------------------------

_segments = st.sampled_from(["", ".", "..", "workspace", "workspace2", "a", "b", "etc", "%2e%2e", "~"])
_paths = st.builds(
    lambda lead, segs: lead + "/".join(segs),
    st.sampled_from(["/", "//", "", "./", "file://", "file:///"]),
    st.lists(_segments, max_size=8),
)


def _oracle(path: str) -> str | None:
    """posixpath's lexical normal form, or None for a path that climbs above / (posixpath would
    silently clamp it there)."""
    depth = 0
    for seg in path.split("/"):
        if seg == "..":
            depth -= 1
            if depth < 0:
                return None
        elif seg not in ("", "."):
            depth += 1
    out = posixpath.normpath(path)
    return "/" + out.lstrip("/")


@settings(max_examples=2000, deadline=None)
@given(_paths, st.sampled_from([None, "/workspace", "/"]))
def test_never_admits_a_path_whose_normal_form_leaves_the_root(value, base):
    why = confinement_violation(value, within=["/workspace"], base=base)
    if why is not None:
        return
    try:
        path = path_from_argument(value)
    except PathRefused:
        raise AssertionError("admitted a refused URI")
    if not path.startswith("/"):
        assert base is not None
        path = base + "/" + path
    normal = _oracle(path)
    assert normal is not None, value
    assert normal == "/workspace" or normal.startswith("/workspace/"), (value, normal)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c d", "é", "x%y"]), min_size=0, max_size=5))
def test_plain_paths_below_the_root_are_admitted_also_as_file_uris(segs):
    path = "/workspace/" + "/".join(segs)
    assert confinement_violation(path, within=["/workspace"]) is None
    assert confinement_violation("file://" + quote(path), within=["/workspace"]) is None
    assert normalize_path(path) == posixpath.normpath(path)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="/.ab", max_size=12), st.text(alphabet="/.ab", max_size=12))
def test_is_inside_is_component_wise(path, root):
    try:
        p, r = normalize_path("/" + path), normalize_path("/" + root)
    except PathRefused:
        return
    expected = r == "/" or p == r or p.split("/")[: len(r.split("/"))] == r.split("/")
    assert is_inside(p, r) == expected


# --- the docs' examples run ---------------------------------------------------------------------


def _doc_policies(page: str) -> list[str]:
    text = (ROOT / "docs" / page).read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    # a named example (tests/docs_examples.py) starts with its "# example: <name>" line
    blocks = [re.sub(r"\A#\s*example:[^\n]*\n", "", b) for b in blocks]
    return [b for b in blocks if b.startswith('version: "2.0"')]


def test_every_docs_policy_loads_without_warnings():
    blocks = _doc_policies("policy.md")
    assert len(blocks) >= 4
    for block in blocks:
        assert load(block).warnings == (), block


def test_docs_policies_that_take_paths_confine_them():
    """Every policy in docs/ and examples/ that names a path argument uses path_confinement and
    denies the `..` escape; none confines paths with a regex."""
    sources = [b for page in ("policy.md", "wrap.md") for b in _doc_policies(page)]
    sources.append(EXAMPLE.read_text())
    checked = 0
    for block in sources:
        assert not re.search(r"pattern:\s*\"\^/", block), block
        policy = load(block)
        for rule in policy.path_confinement:
            for tool in ("read_file", "read_text_file", "list_dir", "list_directory", "move_file"):
                if not any(re.fullmatch(t.replace("*", ".*"), tool) for t in rule.tools):
                    continue
                args = {a: "/workspace/../etc/passwd" for a in rule.args}
                assert evaluate(policy, tool, args).outcome == "deny", (block, tool)
                checked += 1
    assert checked >= 4


# --- ~ and $HOME in within and base (docs/policy.md, "Path confinement") -------------------------


@pytest.mark.parametrize(
    "written, home, expected",
    [
        ("~/ws", "/home/ann", "/home/ann/ws"),
        ("~", "/home/ann", "/home/ann"),
        ("$HOME/ws/../src", "/home/ann", "/home/ann/src"),
        ("${HOME}/ws", "/home/ann/", "/home/ann/ws"),
        ("~/ws", "/", "/ws"),
        ("/srv/~/x", "/home/ann", "/srv/~/x"),  # only a leading ~ stands for the home directory
    ],
)
def test_home_is_expanded_for_the_loading_user(written, home, expected):
    text = (
        f'version: "2.0"\npath_confinement: [{{tools: [r], args: [path], within: ["{written}"], base: "{written}"}}]\n'
    )
    rule = load_policy(text.encode(), source="pol.yaml", home=home).path_confinement[0]
    assert rule.within == (expected,) and rule.base == expected


@pytest.mark.parametrize(
    "written, home, fragment",
    [
        ("~/ws", None, "the home directory is not known"),
        ("$HOME", "relative/home", "the home directory is not known"),
        ("~bob/ws", "/home/ann", "~user is not expanded"),
        ("$HOMEDIR/ws", "/home/ann", "must be an absolute path, ~ or $HOME"),
    ],
)
def test_home_that_cannot_be_expanded_is_refused(written, home, fragment):
    text = f'version: "2.0"\npath_confinement: [{{tools: [r], args: [path], within: ["{written}"]}}]\n'
    with pytest.raises(PolicyError) as info:
        load_policy(text.encode(), source="pol.yaml", home=home)
    assert info.value.kind == "validation" and fragment in str(info.value)


def test_a_policy_file_expands_home_for_the_user_running_it(tmp_path, monkeypatch):
    from assay.policy import load_policy_file

    pol = tmp_path / "pol.yaml"
    pol.write_text(
        'version: "2.0"\ntools: {allow: [r]}\nenforcement: {unconstrained_tools: allow}\npath_confinement: [{tools: [r], args: [path], within: [~/ws]}]\n'
    )
    monkeypatch.setenv("HOME", "/home/ann")
    policy = load_policy_file(str(pol))
    assert evaluate(policy, "r", {"path": "/home/ann/ws/a.txt"}).outcome == "allow"
    assert evaluate(policy, "r", {"path": "/home/bob/ws/a.txt"}).reason_code == "E_PATH_CONFINEMENT"
    monkeypatch.setenv("HOME", "/home/bob")
    assert evaluate(load_policy_file(str(pol)), "r", {"path": "/home/bob/ws/a.txt"}).outcome == "allow"
