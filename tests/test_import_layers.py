"""The package's layering (docs/architecture.md, "Layers"), read from the source with ast.

Every import statement counts: at the top of a module, inside a function, under
``if TYPE_CHECKING:``. A dependency that is only hidden is still a dependency, so the rules below
hold for all of them:

- no import cycle between modules;
- :data:`RULES`: the sans-IO core imports no shell and no I/O library; a shell imports no other
  shell; the process runtime imports no shell.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent / "assay"

# -- the rule table: extend it when a package moves or a shell is added --------------------------

#: The sans-IO core: plain code over bytes and values (docs/architecture.md): the policy and its
#: decision pipeline, the detectors, and the agent session core.
CORE = ("assay.policy", "assay.inspect", "assay.session", "assay.gateway")
#: The process runtime: everything that spawns goes through it (shells use it; it uses no shell).
RUNTIME = ("assay.proc",)
#: The shells, by name: the packages that perform I/O under trio around the core. A module is in
#: a shell when it is one of these or under one of them.
SHELLS: dict[str, tuple[str, ...]] = {
    "stdio": ("assay.shells.stdio",),
    "upstream_http": ("assay.shells.upstream_http",),
    "store": ("assay.store",),
    "serve": ("assay.shells.serve",),
}
#: What puts a run together (the core, a shell, an upstream, the store) and what parses a command
#: line: above every shell, so no shell imports them.
ENTRIES = ("assay.wrap.run", "assay.wrap.finish", "assay.wrap.remote", "assay.wrap.sharing", "assay.serve", "assay.cli")
# (assay.wrap.options, the one declaration of wrap's options, and assay.wrap.errors are plain
# declarations every layer may read)
#: Libraries of the shells (their top-level import names).
IO_LIBRARIES = ("trio", "httpx2", "psycopg", "psycopg_pool")


class Rule(NamedTuple):
    """Modules under ``importers`` import no module under ``forbidden`` (and no library named
    in ``libraries``); ``why`` is what a failure says."""

    importers: tuple[str, ...]
    forbidden: tuple[str, ...]
    libraries: tuple[str, ...]
    why: str


def _all_shells() -> tuple[str, ...]:
    return tuple(m for members in SHELLS.values() for m in members)


RULES: list[Rule] = [
    Rule(CORE, RUNTIME + _all_shells(), IO_LIBRARIES, "the sans-IO core imports no shell and no I/O library"),
    Rule(RUNTIME, _all_shells(), (), "the process runtime imports no shell"),
    Rule(_all_shells(), ENTRIES, (), "no shell imports what puts a run together or the command line"),
    Rule(CORE, ENTRIES, (), "the sans-IO core imports nothing that puts a run together"),
    *(
        Rule(
            members,
            tuple(m for other, others in SHELLS.items() if other != name for m in others),
            (),
            f"the {name} shell imports no other shell",
        )
        for name, members in SHELLS.items()
    ),
]


# -- the import graph ------------------------------------------------------------------------------


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted name -> file of every module of the package (a package is its ``__init__``)."""
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _owner(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path = ROOT) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> the package's modules it imports, module -> the top-level names of the other
    libraries it imports), over every import statement anywhere in each module."""
    known = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in known}
    external: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                # ``from package import module`` imports that module; ``from module import name``
                # the module itself
                targets = [
                    f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module for alias in node.names
                ]
            for target in targets:
                owner = _owner(target, known)
                if owner is not None:
                    graph[name].add(owner)
                elif not target.startswith("assay.") and target != "assay":
                    external[name].add(target.partition(".")[0])
    return graph, external


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt == node:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def _under(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def violations(graph: dict[str, set[str]], external: dict[str, set[str]], rules: list[Rule]) -> list[str]:
    """Every import that breaks a rule, as ``importer -> imported (why)``."""
    out = []
    for rule in rules:
        for name in sorted(graph):
            if not _under(name, rule.importers):
                continue
            out += [
                f"{name} -> {target} ({rule.why})"
                for target in sorted(graph[name])
                if _under(target, rule.forbidden) and not _under(target, rule.importers)
            ]
            out += [f"{name} -> {lib} ({rule.why})" for lib in sorted(external[name]) if lib in rule.libraries]
    return out


GRAPH, EXTERNAL = import_graph()


def test_no_import_cycles():
    found = set(cycles(GRAPH))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


def test_the_layers_hold():
    assert violations(GRAPH, EXTERNAL, RULES) == []


def test_every_shell_and_core_package_exists():
    known = modules()
    for prefix in (*CORE, *RUNTIME, *_all_shells()):
        assert prefix in known, f"{prefix}: in the rule table of tests/test_import_layers.py but not in the package"


# -- the checks themselves, on a made-up package ---------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "assay"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_hidden_imports_count(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from assay.core.b import B\n",
            "core/b.py": "def f():\n    from . import a\n    import trio\n",
            "core/c.py": "from assay.core import a\n",
            "shell.py": "import assay.core.c\n",
        },
    )
    graph, external = import_graph(root)
    assert graph["assay.core.a"] == {"assay.core.b"} and graph["assay.core.b"] == {"assay.core.a"}
    assert graph["assay.shell"] == {"assay.core.c"} and external["assay.core.b"] == {"trio"}
    assert cycles(graph) == [frozenset({"assay.core.a", "assay.core.b"})]
    rules = [Rule(("assay.core",), ("assay.shell",), ("trio",), "core")]
    assert violations(graph, external, rules) == ["assay.core.b -> trio (core)"]
    graph["assay.core.c"].add("assay.shell")
    assert "assay.core.c -> assay.shell (core)" in violations(graph, external, rules)
