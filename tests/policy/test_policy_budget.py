"""The YAML expansion budget (docs/policy.md, 'Loading'): aliases are counted as if copied, by
nodes and by scalar characters, and a document over the budget is refused before anything
walks it. The issue's bomb (one large string referenced 83,521 times through nested aliases in a
schema `enum`, about 89,000 nodes: under the node cap) used to peak at 1.4 GiB for 5 KiB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from assay.policy import PolicyError, evaluate, load_policy
from assay.policy.yamlio import EXPANSION_FACTOR, YamlStructureError, expansion_budget, parse_yaml

PEAK_LIMIT_MIB = 100


def bomb(total: int, fan: int = 16) -> bytes:
    """`enum: [&l3 [&l2 [&l1 [&s "AAA…", *s x16], *l1 x16], *l2 x16], *l3 x16]`, ``total`` bytes."""

    def build(n: int) -> str:
        cur = f'&s "{"A" * n}"'
        ref = "s"
        for name in ("l1", "l2", "l3"):
            cur = f"&{name} [{cur}, " + ", ".join([f"*{ref}"] * fan) + "]"
            ref = name
        cur = f"[{cur}, " + ", ".join([f"*{ref}"] * fan) + "]"
        return f'version: "2.0"\nschemas:\n  read_file: {{enum: {cur}}}\n'

    return build(total - len(build(0))).encode()


_MEASURE = textwrap.dedent(
    """
    import json, sys, time
    from assay.policy import PolicyError, evaluate, load_policy
    data = open(sys.argv[1], "rb").read()
    start = time.monotonic()
    try:
        policy = load_policy(data, source="bomb.yaml")
        result = {"loaded": True, "code": evaluate(policy, "read_file", {"x": 1}).reason_code}
    except PolicyError as exc:
        result = {"loaded": False, "error": str(exc), "kind": exc.kind}
    result["seconds"] = time.monotonic() - start
    # VmHWM: peak resident set of this process image (ru_maxrss would carry the parent's peak
    # over fork and exec)
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    result["peak_mib"] = int(hwm.split()[1]) / 1024
    print(json.dumps(result))
    """
)


def measure(tmp_path, data: bytes) -> dict:
    path = tmp_path / "policy.yaml"
    path.write_bytes(data)
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("size", [5 * 1024, 20 * 1024, 100 * 1024])
def test_the_enum_bomb_is_refused_quickly_with_bounded_memory(tmp_path, size):
    data = bomb(size)
    assert len(data) == size
    got = measure(tmp_path, data)
    assert got["loaded"] is False and got["kind"] == "structure"
    assert got["error"] == (
        "bomb.yaml: document expands to more than 4000000 characters of scalars once aliases "
        "are expanded (alias expansion refused)"
    )
    assert got["seconds"] < 5, got
    assert got["peak_mib"] < PEAK_LIMIT_MIB, got


def test_a_policy_just_inside_the_budget_loads_and_stays_bounded(tmp_path):
    """The largest accepted expansion (about 4 million characters) still evaluates in < 100 MiB."""
    budget = expansion_budget(0)
    fan = 15  # 15**3 = 3375 references
    n = budget // (fan**3 + 1) - 10
    text = f'version: "2.0"\nschemas:\n  read_file: {{enum: [&l2 [&l1 [&l0 [&s "{"A" * n}", '
    text += ", ".join(["*s"] * (fan - 1)) + "], " + ", ".join(["*l0"] * (fan - 1)) + "], "
    text += ", ".join(["*l1"] * (fan - 1)) + "]]}\n"
    got = measure(tmp_path, text.encode())
    assert got["loaded"] is True and got["code"] == "E_ARG_SCHEMA", got
    assert got["peak_mib"] < PEAK_LIMIT_MIB, got


def test_budget_counts_characters_not_only_nodes():
    # 30 nodes, but 10 aliases of a 1,000-character string are 10,000 characters
    text = 'a: &a "' + "x" * 1000 + '"\nb: [' + ", ".join(["*a"] * 10) + "]\n"
    assert parse_yaml(text, byte_ceiling=2800) is not None  # budget 11,200 >= 11,002 (keys too)
    with pytest.raises(YamlStructureError, match="more than 10000 characters of scalars"):
        parse_yaml(text, byte_ceiling=2500)  # budget 10,000 < 11,002


def test_a_document_without_aliases_always_fits():
    """The budget is a multiple of the larger of the ceiling and the document itself."""
    assert expansion_budget(10, 5) == EXPANSION_FACTOR * 10
    text = "a: " + "x" * 5000 + "\n"
    assert parse_yaml(text, byte_ceiling=10) == {"a": "x" * 5000}


def test_node_cap_still_holds():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(8):
        prev, cur = chr(97 + i), chr(98 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    with pytest.raises(PolicyError, match="more than 100000 nodes"):
        load_policy(("\n".join(lines) + "\n").encode())


def test_wrap_refuses_the_bomb_in_one_line(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_bytes(bomb(100 * 1024))
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from assay.cli.app import main; sys.exit(main())",
            "mcp",
            "wrap",
            "--policy",
            str(path),
            "--",
            sys.executable,
            "-c",
            "pass",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "ASSAY_MCP_MAX_POLICY_BYTES"},
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith(f"fatal: {path}: document expands to more than")
    assert "Traceback" not in proc.stderr


def test_evaluate_still_works_for_ordinary_aliases():
    policy = load_policy(
        b'version: "2.0"\nx: &p {type: string}\nschemas:\n  t: {type: object, properties: {a: *p, b: *p}}\n'
    )
    assert evaluate(policy, "t", {"a": "x", "b": "y"}).outcome == "allow"
