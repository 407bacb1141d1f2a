"""wrap's cache of generated code (docs/wrap.md, "The code cache"): a hit is the code a compile
gives, flags and all; a changed text replaces the old one; a foreign file is ignored; and the
second start of `assay mcp wrap` compiles nothing and writes nothing."""

from __future__ import annotations

import ast
import builtins
import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.wrap import codecache
from assay.wrap.codecache import DIR_NAME, CodeCache


def _define() -> tuple[type, type]:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: int = 2
        tags: tuple[str, ...] = ()

    @attrs.frozen
    class Box:
        size: int
        name: str = "box"

    return Point, Box


def _cache_file(state: Path) -> Path:
    (path,) = (state / DIR_NAME).iterdir()
    return path


def test_a_hit_is_the_code_a_compile_gives(tmp_path):
    state = str(tmp_path / "state")
    with CodeCache(state).installed() as first:
        Point, Box = _define()
    assert first.misses > 0 and first.hits == 0
    assert oct(_cache_file(tmp_path / "state").stat().st_mode & 0o777) == "0o600"
    with CodeCache(state).installed() as second:
        Point2, Box2 = _define()
    assert second.hits > 0
    # only attrs' __hash__ text varies between processes; within one it is the same
    assert second.misses == 0
    for P in (Point, Point2):
        p = P(1)
        assert repr(p).endswith(".Point(x=1, y=2, tags=())") and hash(p) == hash(P(1)) and p == P(1, 2, ())
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.x = 3  # type: ignore[misc]
    for B in (Box, Box2):
        assert repr(B(3)) == "Box(size=3, name='box')", repr(B(3))
        assert B(3) == B(3) and hash(B(3)) == hash(B(3))
    assert builtins.compile is codecache.builtins_compile and "exec" not in vars(dataclasses)


def test_flags_are_inherited_as_compile_inherits_them(tmp_path):
    """This module has `from __future__ import annotations`: compile() called from here
    inherits it, through the cache too; dont_inherit and explicit flags are kept."""
    source = "def f(x: int) -> int:\n    return x\n"
    expected = [
        compile(source, "<f>", "exec"),
        compile(source, "<f>", "exec", dont_inherit=True),
        compile(source, "<f>", "exec", flags=0, dont_inherit=True, optimize=2),
    ]
    for state in ("a", "a"):
        with CodeCache(str(tmp_path / state)).installed():
            got = [
                compile(source, "<f>", "exec"),
                compile(source, "<f>", "exec", dont_inherit=True),
                compile(source, "<f>", "exec", flags=0, dont_inherit=True, optimize=2),
            ]
        for want, code in zip(expected, got, strict=True):
            assert code.co_flags == want.co_flags
            ns_want: dict[str, object] = {}
            ns_got: dict[str, object] = {}
            exec(want, ns_want)
            exec(code, ns_got)
            assert ns_got["f"].__annotations__ == ns_want["f"].__annotations__  # type: ignore[attr-defined]
    assert ns_got["f"].__annotations__ == {"x": int, "return": int}  # type: ignore[attr-defined]


def test_the_interpreters_optimization_level_is_part_of_the_key(tmp_path):
    """Code kept by a plain start is not what `python -O` gets (its asserts are gone)."""
    probe = textwrap.dedent("""\
        import sys
        from assay.wrap.codecache import CodeCache
        with CodeCache(sys.argv[1]).installed() as cache:
            code = compile("def f():\\n    assert False\\n    return 1\\n", "<attrs generated m.F>", "exec")
        ns = {}
        exec(code, ns)
        try:
            result = ns["f"]()
        except AssertionError:
            result = "assert"
        print(result, cache.hits, cache.misses)
    """)
    state = str(tmp_path / "state")
    seen = [
        subprocess.run([sys.executable, *flags, "-c", probe, state], capture_output=True, text=True, timeout=60).stdout
        for flags in ([], ["-O"], [], ["-O"])
    ]
    assert [line.split()[0] for line in seen] == ["assert", "1", "assert", "1"], seen
    assert seen[1].split()[1:] == ["0", "1"]  # the plain start's code was not taken


def test_what_is_no_code_of_a_str_passes_through(tmp_path):
    with CodeCache(str(tmp_path / "s")).installed() as cache:
        tree = compile("x = 1", "<t>", "exec", flags=ast.PyCF_ONLY_AST)
        from_bytes = compile(b"y = 2", "<t>", "exec")
        from_tree = compile(ast.parse("z = 3"), "<t>", "exec")
    assert isinstance(tree, ast.Module)
    assert from_bytes.co_names == ("y",) and from_tree.co_names == ("z",)
    assert cache.hits == cache.misses == 0
    assert not (tmp_path / "s").exists()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), min_size=1, max_size=4), st.booleans())
def test_attrs_hash_seed_is_put_back_into_the_kept_code(tmp_path_factory, seeds, cached_hash):
    """attrs writes a per-process number into each class's `__hash__`: the text is kept once,
    with a placeholder, and each hit is the code a compile of its own text gives."""
    state = str(tmp_path_factory.mktemp("state"))
    prefix, suffix = ("_cache_wrapper(", ")") if cached_hash else ("", "")

    def text(seed: int) -> str:
        return f"def __hash__(self):\n        return {prefix}hash((\n                {seed},\n                self.x,\n            )){suffix}\n"

    with CodeCache(state).installed():
        compile(text(7), "<attrs generated methods m.C>", "exec")
    stamp = _cache_file(Path(state)).stat().st_mtime_ns
    for seed in seeds:
        with CodeCache(state).installed() as cache:
            code = compile(text(seed), "<attrs generated methods m.C>", "exec")
        want = compile(text(seed), "<attrs generated methods m.C>", "exec")
        assert (cache.hits, cache.misses) == (1, 0)
        assert code.co_consts[0].co_consts == want.co_consts[0].co_consts
        assert code.co_consts[0].co_code == want.co_consts[0].co_code
        assert _cache_file(Path(state)).stat().st_mtime_ns == stamp


def _kept(state: str) -> dict[bytes, object]:
    import marshal

    raw = _cache_file(Path(state)).read_bytes()
    entries: dict[bytes, object] = marshal.loads(raw[len(codecache._header()) :])
    return entries


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(min_value=-(2**70), max_value=2**70), min_size=1, max_size=4))
def test_a_changed_text_replaces_the_one_kept_under_its_file_name(tmp_path_factory, numbers):
    """A class whose generated text changed (an upgrade) is kept anew, in place of the old
    text of its file name; an unchanged start writes nothing."""
    state = str(tmp_path_factory.mktemp("state"))

    def start(number: int) -> CodeCache:
        with CodeCache(state).installed() as cache:
            compile(f"def f(self):\n    return {number}\n", "<attrs generated methods m.C>", "exec")
            compile("def g():\n    return 1\n", "<attrs generated methods m.D>", "exec")
            compile("def h():\n    return 2\n", "<string>", "exec")
        return cache

    start(0)
    for number in numbers:
        changed = start(number)
        assert (changed.hits, changed.misses) == ((3, 0) if number == 0 else (2, 1))
        assert len(_kept(state)) == 3
        stamp = _cache_file(Path(state)).stat().st_mtime_ns
        again = start(number)
        assert (again.hits, again.misses) == (3, 0)
        assert _cache_file(Path(state)).stat().st_mtime_ns == stamp
        start(0)


@pytest.mark.parametrize("damage", ["group-writable", "symlink", "garbage", "other-magic", "open-dir"])
def test_an_unsafe_or_broken_cache_is_ignored(tmp_path, damage):
    state = tmp_path / "state"
    with CodeCache(str(state)).installed():
        _define()
    path = _cache_file(state)
    if damage == "group-writable":
        path.chmod(0o620)
    elif damage == "symlink":
        real = tmp_path / "elsewhere.bin"
        real.write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(real)
    elif damage == "garbage":
        path.write_bytes(codecache._header() + b"\xff\x00garbage")
    elif damage == "other-magic":
        path.write_bytes(b"assay.code_cache.v1\0XXXX" + path.read_bytes()[len(codecache._header()) :])
    else:
        (state / DIR_NAME).chmod(0o777)
    with CodeCache(str(state)).installed() as cache:
        Point, _Box = _define()
    assert cache.hits == 0 and cache.misses > 0
    assert Point(1) == Point(1)


def test_an_unusable_state_directory_is_no_error(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with CodeCache(str(tmp_path / "file")).installed() as cache:
        Point, _Box = _define()
    assert cache.misses > 0 and Point(1).y == 2


@pytest.mark.parametrize("where", ["environment", "option", "option=value"])
def test_the_second_wrap_start_compiles_nothing(tmp_path, base_env, where):
    """Also its options' and policy's dataclasses: the window opens before wrap's first
    import when the line names the state directory plainly (or not at all), else once the
    line is parsed."""
    (tmp_path / "assay.yaml").write_text('version: "2.0"\ntools:\n  allow: ["echo"]\n')
    (tmp_path / "server.py").write_text(
        "import sys\nsys.stdin.readline()\n"
        'sys.stdout.write(\'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}\\n\')\n'
        "sys.stdout.flush()\nsys.stdin.read()\n"
    )
    probe = textwrap.dedent("""\
        import json, sys
        from assay.cli import main
        from assay.wrap import codecache
        code = main(["mcp", "wrap", "--policy", "assay.yaml", *OPTIONS, "--", sys.executable, "server.py"])
        c = codecache.last
        with open("counts.json", "w") as fh:
            json.dump({"code": code, "hits": c.hits, "misses": c.misses}, fh)
    """)
    state = tmp_path / "xdg" / "assay"
    options = {
        "environment": [],
        "option": ["--state-dir", str(state)],
        "option=value": [f"--state-dir={state}"],  # (read by cyclopts)
    }[where]
    probe = probe.replace("*OPTIONS", repr(options)[1:-1] or "*()")
    frame = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}\n'
    env = {**base_env, "XDG_STATE_HOME": str(tmp_path / "xdg") if where == "environment" else str(tmp_path / "no")}
    seen = []
    stamps = []
    for _ in range(3):
        res = subprocess.run(
            [sys.executable, "-c", probe], input=frame, capture_output=True, timeout=60, cwd=tmp_path, env=env
        )
        assert res.returncode == 0, res.stderr
        assert b'"id":1' in res.stdout, (res.stdout, res.stderr)
        seen.append(json.loads((tmp_path / "counts.json").read_text()))
        stamps.append(_cache_file(tmp_path / "xdg" / "assay").stat().st_mtime_ns)
    first, second, third = seen
    assert first["misses"] > 100
    # attrs' `__hash__` texts carry a per-process seed: kept with a placeholder
    assert second["misses"] == 0
    assert second["hits"] == first["hits"] + first["misses"]
    assert stamps[1] == stamps[2]  # nothing stable was new: not written again
    assert third["hits"] == second["hits"]
    assert os.stat(tmp_path / "xdg" / "assay" / DIR_NAME).st_mode & 0o777 == 0o700
