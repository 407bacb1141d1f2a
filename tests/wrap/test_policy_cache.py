"""wrap's cache of parsed policy documents (docs/wrap.md, "The policy cache"), and what it buys:
the start-up import set (docs/testing.md, "Start-up of `assay mcp wrap`")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.policy.errors import PolicyError
from assay.policy.files import load_policy_file
from assay.policy.loader import parse_policy_bytes
from assay.wrap.policycache import DIR_NAME, FORMAT, MAX_ENTRIES, PolicyCache

POLICY = b'version: "2.0"\ntools:\n  allow: ["echo", "search"]\n  deny: ["exec"]\nbogus_key: 1\n'


def _load(path: Path, cache: PolicyCache, **kw):
    warnings: list[str] = []
    policy = load_policy_file(str(path), warn=warnings.append, cache=cache, **kw)
    return policy, warnings


def _entries(state: Path) -> list[Path]:
    d = state / DIR_NAME
    return sorted(d.glob("*.json")) if d.exists() else []


def test_a_hit_loads_the_same_policy_and_warnings_as_a_miss(tmp_path):
    path = tmp_path / "assay.yaml"
    path.write_bytes(POLICY)
    cache = PolicyCache(str(tmp_path / "state"))
    first, warned = _load(path, cache)
    (entry,) = _entries(tmp_path / "state")
    assert oct(entry.stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "state").stat().st_mode & 0o777) == "0o700"
    assert json.loads(entry.read_text())["format"] == FORMAT
    second, warned_again = _load(path, PolicyCache(str(tmp_path / "state")))
    assert warned_again == warned and any("bogus_key" in w for w in warned)
    assert second.digest == first.digest and second.warnings == first.warnings
    assert second.to_dict() == first.to_dict()


def test_a_hit_skips_the_parse_and_other_bytes_miss(tmp_path, monkeypatch):
    path = tmp_path / "assay.yaml"
    path.write_bytes(POLICY)
    state = str(tmp_path / "state")
    _load(path, PolicyCache(state))
    import assay.policy.loader as loader

    def no_parse(*a, **k):
        raise AssertionError("parsed although cached")

    monkeypatch.setattr(loader, "parse_policy_bytes", no_parse)
    _load(path, PolicyCache(state))  # a hit
    path.write_bytes(POLICY + b"# changed\n")
    with pytest.raises(AssertionError, match="parsed although cached"):
        _load(path, PolicyCache(state))
    monkeypatch.undo()
    # another ceiling (the alias budget derives from it) is another key
    _load(path, PolicyCache(state), limit=4096)
    assert len(_entries(tmp_path / "state")) == 2  # the changed bytes raised before they were kept


def _forge(state: Path, document: object, **changes: object) -> Path:
    (entry,) = _entries(state)
    body = json.loads(entry.read_text())
    body["document"] = document
    body.update(changes)
    entry.write_text(json.dumps(body))
    return entry


@pytest.mark.parametrize(
    "change",
    [
        {"assay": "0.0.0-another"},
        {"format": "assay.policy_cache.v0"},
        {"key": "0" * 64},
        {"document": ["not", "a", "mapping"]},
    ],
)
def test_a_foreign_entry_is_ignored(tmp_path, change):
    path = tmp_path / "assay.yaml"
    path.write_bytes(POLICY)
    state = tmp_path / "state"
    original, _ = _load(path, PolicyCache(str(state)))
    forged = {"version": "2.0", "tools": {"allow": ["exec"]}}
    _forge(state, change.pop("document", forged), **change)
    again, _ = _load(path, PolicyCache(str(state)))
    assert again.digest == original.digest


def test_an_unsafe_or_broken_entry_is_ignored(tmp_path):
    path = tmp_path / "assay.yaml"
    path.write_bytes(POLICY)
    state = tmp_path / "state"
    original, _ = _load(path, PolicyCache(str(state)))
    forged = {"version": "2.0", "tools": {"allow": ["exec"]}}
    entry = _forge(state, forged)
    assert _load(path, PolicyCache(str(state)))[0].digest != original.digest  # (the forgery works when trusted)
    for mode in (0o620, 0o602):  # writable by group or others
        entry.chmod(mode)
        assert _load(path, PolicyCache(str(state)))[0].digest == original.digest
    entry.chmod(0o600)
    (state / DIR_NAME).chmod(0o770)
    assert _load(path, PolicyCache(str(state)))[0].digest == original.digest
    (state / DIR_NAME).chmod(0o700)
    target = tmp_path / "elsewhere.json"
    target.write_bytes(entry.read_bytes())
    entry.unlink()
    entry.symlink_to(target)  # a symlink is never followed
    assert _load(path, PolicyCache(str(state)))[0].digest == original.digest
    for text in ("{", '{"format": NaN}', "[]", '{"a": 1, "a": 2}', "\xff"):
        entry.unlink()
        entry.write_text(text, errors="surrogateescape")
        assert _load(path, PolicyCache(str(state)))[0].digest == original.digest


def test_an_unusable_state_directory_is_no_error(tmp_path):
    path = tmp_path / "assay.yaml"
    path.write_bytes(POLICY)
    (tmp_path / "file").write_text("")
    policy, _ = _load(path, PolicyCache(str(tmp_path / "file")))  # not a directory
    assert policy.tools.allow == ("echo", "search")
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    _load(path, PolicyCache(str(shared)))
    assert not (shared / DIR_NAME).exists()  # never written into a directory others can write


def test_errors_are_never_cached_and_stay_the_same(tmp_path):
    path = tmp_path / "assay.yaml"
    state = tmp_path / "state"
    for text in (b"tools: [\n", b"- a list\n", b'version: "2.0"\ntools:\n  allow: 3\n'):
        path.write_bytes(text)
        with pytest.raises(PolicyError) as plain:
            load_policy_file(str(path))
        with pytest.raises(PolicyError) as cached:
            load_policy_file(str(path), cache=PolicyCache(str(state)))
        assert str(cached.value) == str(plain.value)
    assert _entries(state) == []


def test_entries_are_bounded(tmp_path):
    state = tmp_path / "state"
    path = tmp_path / "assay.yaml"
    for i in range(MAX_ENTRIES + 3):
        path.write_bytes(POLICY + f"# {i}\n".encode())
        _load(path, PolicyCache(str(state)))
    assert len(_entries(state)) == MAX_ENTRIES


yaml_keys = st.one_of(st.text(max_size=5), st.integers(), st.booleans(), st.none(), st.floats())
yaml_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(yaml_keys, inner, max_size=3)),
    max_leaves=12,
)


@given(st.dictionaries(yaml_keys, yaml_values, max_size=4))
def test_a_document_is_kept_only_when_json_carries_it_exactly(doc):
    """What comes back is exactly what was parsed (types included), or nothing is kept."""
    cache = PolicyCache("/nonexistent")
    snap = cache.snapshot(doc)
    if snap is None:
        return
    assert isinstance(snap, str)
    back = json.loads(snap)

    def same(a: object, b: object) -> bool:
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            return list(a) == list(b) and all(same(a[k], b[k]) for k in a)  # type: ignore[index]
        if isinstance(a, list):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))  # type: ignore[arg-type]
        return a == b

    assert same(back, doc)


def test_yaml_scalars_that_json_cannot_carry_are_not_kept():
    cache = PolicyCache("/nonexistent")
    for text in (b"a: .nan\n", b"a: .inf\n", b"1: x\n", b"true: x\n", b"~: x\n", b"b: {1.5: x}\n"):
        assert cache.snapshot(parse_policy_bytes(text)) is None, text
    assert cache.snapshot(parse_policy_bytes(b"a: [1, 1.0, true, null, '1']\n")) == '{"a":[1,1.0,true,null,"1"]}'


def test_wrap_start_up_imports_no_yaml_once_cached_and_no_ctypes_util(tmp_path, base_env):
    """The start-up import set of `assay mcp wrap` up to its first reply: PyYAML only when the
    policy's parse is not cached (the first run), never ctypes.util and what it brings."""
    (tmp_path / "assay.yaml").write_text('version: "2.0"\ntools:\n  allow: ["echo"]\n')
    (tmp_path / "server.py").write_text(
        "import sys\nsys.stdin.readline()\n"
        'sys.stdout.write(\'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}\\n\')\n'
        "sys.stdout.flush()\nsys.stdin.read()\n"
    )
    watched = ("yaml", "assay.policy.yamlio", "ctypes.util", "shutil", "tempfile", "bz2", "lzma")
    probe = textwrap.dedent("""\
        import json, sys
        from assay.cli import main
        code = main(["mcp", "wrap", "--policy", "assay.yaml", "--", sys.executable, "server.py"])
        with open("loaded.json", "w") as fh:
            json.dump({"code": code, "loaded": [m for m in WATCHED if m in sys.modules]}, fh)
    """).replace("WATCHED", repr(watched))
    frame = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}\n'
    env = {**base_env, "XDG_STATE_HOME": str(tmp_path / "xdg")}
    seen = []
    for _ in range(2):
        res = subprocess.run(
            [sys.executable, "-c", probe], input=frame, capture_output=True, timeout=60, cwd=tmp_path, env=env
        )
        assert res.returncode == 0, res.stderr
        assert b'"id":1' in res.stdout, (res.stdout, res.stderr)
        assert b"[assay] loading policy from assay.yaml" in res.stderr
        seen.append(json.loads((tmp_path / "loaded.json").read_text()))
    assert seen == [
        {"code": 0, "loaded": ["yaml", "assay.policy.yamlio"]},  # the first run parses and keeps the document
        {"code": 0, "loaded": []},
    ]
    assert os.listdir(tmp_path / "xdg" / "assay" / DIR_NAME)
