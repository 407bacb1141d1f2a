"""End to end: the declared baseline and hidden tools with real SDK clients and a real server
(docs/manifest.md, "5. Enforce"; docs/wrap.md, "Declared baseline", "Hiding denied tools").

The walk is the one docs/manifest.md tells a user to type: wrap observes the server and writes
the observed manifest, `assay mcp manifest candidate` and `promote` turn it into declared.json,
and wrap enforces it. tests/e2e/baseline_server.py changes one description and adds a tool when
BASELINE_SERVER_CHANGED=1 is in its environment (a server update, or a rug pull).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from _e2e_support import ASSAY, E2E, RUN_TIMEOUT, WrapRun, assert_all_ended, assert_denied, recorded
from test_e2e_hostile import run_ts_v1

SERVER = [sys.executable, str(E2E / "baseline_server.py")]
LABEL = "baseline-server"
POLICY = 'version: "2.0"\ntools:\n  deny: ["exec"]\n'  # everything else: allowed (unconstrained: warn)
DECLARED = {"echo", "lookup", "exec"}


def _policy(tmp: Path) -> Path:
    path = tmp / "assay.yaml"
    path.write_text(POLICY)
    return path


def _run(tmp: Path, name: str, *extra: str) -> WrapRun:
    where = tmp / name
    where.mkdir()
    return WrapRun(where, _policy(tmp), SERVER, label=LABEL, extra=list(extra))


async def _python_client(run: WrapRun, env: dict[str, str], calls: list[tuple[str, dict]]) -> tuple[list[str], list]:
    """The official Python SDK client: initialize, list tools, make `calls`."""
    params = StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=env)
    with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                results = [await session.call_tool(name, arguments) for name, arguments in calls]
    wraps, servers = run.pids()
    await assert_all_ended(wraps + servers)
    return [t.name for t in listed.tools], results


def _assay(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(ASSAY), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=cwd)


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _code_of(result) -> str | None:
    if not result.is_error:
        return None
    text = _text(result)
    payload = json.loads(text[len("Content blocked by policy") :])
    assert_denied(payload["tool"], result.is_error, result.structured_content, text, payload["error_code"])
    return payload["error_code"]


async def _declared(tmp: Path, env: dict[str, str], expect: set[str] = DECLARED) -> Path:
    """observe -> candidate -> promote, as docs/manifest.md tells a user to."""
    observe = _run(tmp, "observe", "--observed-manifest-out", str(tmp / "observed.json"))
    tools, _ = await _python_client(observe, env, [])
    assert set(tools) == expect
    observed = json.loads((tmp / "observed.json").read_text())
    assert observed["status"] == "observed" and observed["server"]["id"] == LABEL
    res = _assay("mcp", "manifest", "candidate", "--from-observed", "observed.json", "--out", "candidate.json", cwd=tmp)
    assert res.returncode == 0, res.stderr
    res = _assay(
        "mcp",
        "manifest",
        "promote",
        "--candidate",
        "candidate.json",
        "--source",
        "observed.json",
        "--out",
        "declared.json",
        cwd=tmp,
    )
    assert res.returncode == 0, res.stderr
    return tmp / "declared.json"


async def test_observe_candidate_promote_enforce_with_the_python_sdk(tmp_path, base_env):
    declared = await _declared(tmp_path, base_env)
    calls = [
        ("echo", {"text": "hi"}),
        ("lookup", {"word": "w"}),
        ("exec", {"command": "id"}),
        ("upload", {"data": "secret"}),
    ]

    # the same server: every declared tool works; exec is still the policy's
    same = _run(tmp_path, "same", "--declared-manifest", str(declared))
    tools, results = await _python_client(same, base_env, calls)
    assert set(tools) == DECLARED
    assert [_code_of(r) for r in results] == [None, None, "E_TOOL_DENIED", "E_TOOL_UNDECLARED"]
    assert "hi" in _text(results[0])

    # the server changed lookup's description and added upload
    changed_env = {**base_env, "BASELINE_SERVER_CHANGED": "1"}
    changed = _run(tmp_path, "changed", "--declared-manifest", str(declared))
    tools, results = await _python_client(changed, changed_env, calls)
    assert set(tools) == DECLARED | {"upload"}  # without --hide-denied-tools the client sees it all
    assert [_code_of(r) for r in results] == [None, "E_TOOL_DRIFT", "E_TOOL_DENIED", "E_TOOL_UNDECLARED"]
    decisions = {d["tool"]: d for d in changed.decisions()}
    assert decisions["lookup"]["reason_code"] == "P_TOOL_DRIFT"
    assert decisions["lookup"]["matched_rule"] == "declared_manifest"
    assert decisions["lookup"]["reason"].startswith("Tool integrity failure: the definition differs")
    assert decisions["upload"]["reason_code"] == "P_TOOL_UNDECLARED"
    assert decisions["upload"]["matched_rule"] == "declared_manifest"

    # the loop closes: observing the changed server and promoting it again makes lookup pass
    again = tmp_path / "again"
    again.mkdir()
    redeclared = await _declared(again, changed_env, DECLARED | {"upload"})
    after = _run(again, "after", "--declared-manifest", str(redeclared))
    _tools, results = await _python_client(after, changed_env, calls)
    assert [_code_of(r) for r in results] == [None, None, "E_TOOL_DENIED", None]


async def test_hidden_tools_with_the_ts_v1_client(node, tmp_path, base_env):
    declared = await _declared(tmp_path, base_env)
    changed_env = {**base_env, "BASELINE_SERVER_CHANGED": "1"}
    steps = [
        {"op": "list"},
        {"op": "call", "name": "exec", "arguments": {"command": "id"}},
        {"op": "call", "name": "upload", "arguments": {"data": "x"}},
        {"op": "call", "name": "echo", "arguments": {"text": "hi"}},
    ]

    plain = _run(tmp_path, "plain")
    out = await run_ts_v1(node, plain, steps, changed_env)
    assert sorted(out[0]["tools"]) == ["echo", "exec", "lookup", "upload"]  # off: the server's list

    hidden = _run(tmp_path, "hidden", "--hide-denied-tools")
    out = await run_ts_v1(node, hidden, steps, changed_env)
    assert sorted(out[0]["tools"]) == ["echo", "lookup", "upload"]
    exec_call, upload, echo = out[1:4]
    assert_denied(
        "exec", exec_call["is_error"], exec_call["structuredContent"], "".join(exec_call["texts"]), "E_TOOL_DENIED"
    )
    assert upload["is_error"] is False and echo["is_error"] is False

    both = _run(
        tmp_path,
        "both",
        "--hide-denied-tools",
        "--declared-manifest",
        str(declared),
        "--observed-manifest-out",
        str(tmp_path / "both-observed.json"),
    )
    out = await run_ts_v1(node, both, steps, changed_env)
    assert sorted(out[0]["tools"]) == ["echo", "lookup"]  # exec: the policy's; upload: undeclared
    assert "thrown" not in out[2], out[2]
    assert_denied(
        "upload", out[2]["is_error"], out[2]["structuredContent"], "".join(out[2]["texts"]), "E_TOOL_UNDECLARED"
    )
    assert out[3]["is_error"] is False
    # the observed manifest still holds the server's whole list
    observed = json.loads((tmp_path / "both-observed.json").read_text())
    assert sorted(t["name"] for t in observed["observed"]["tool_digests"]) == ["echo", "exec", "lookup", "upload"]
    wraps, servers = both.pids()
    await assert_all_ended(wraps + servers)


def _refused(tmp: Path, declared: str, label: str = LABEL) -> tuple[subprocess.CompletedProcess, Path]:
    pids = tmp / "server.pids"
    res = subprocess.run(
        [
            str(ASSAY),
            "mcp",
            "wrap",
            "--policy",
            str(_policy(tmp)),
            "--label",
            label,
            "--declared-manifest",
            declared,
            "--",
            *recorded(pids, SERVER),
        ],
        input=b"",
        capture_output=True,
        timeout=RUN_TIMEOUT,
        cwd=tmp,
    )
    return res, pids


async def test_a_bad_declared_manifest_is_fatal_before_the_server_starts(tmp_path, base_env):
    declared = await _declared(tmp_path, base_env)
    cases = {
        "candidate.json": '--declared-manifest candidate.json: unknown field "status"',
        "observed.json": "--declared-manifest observed.json: unknown field",
        "missing.json": "--declared-manifest: reading missing.json: No such file or directory",
        "/dev/zero": "--declared-manifest: reading /dev/zero: not a regular file",
    }
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (1024 * 1024 + 1))
    cases["big.json"] = "--declared-manifest: reading big.json within the 1048576-byte manifest limit"
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    cases["fifo.json"] = "--declared-manifest: reading fifo.json: not a regular file"
    for path, want in cases.items():
        res, pids = _refused(tmp_path, path)
        loading, fatal = res.stderr.decode().splitlines()  # like a bad policy: that line, then one fatal line
        assert res.returncode == 2, (path, fatal)
        assert loading.startswith("[assay] loading policy from ")
        assert fatal.startswith("fatal: " + want), (path, fatal)
        assert not pids.exists(), f"{path}: the server was started"
    res, pids = _refused(tmp_path, str(declared), label="other")
    assert res.returncode == 2 and not pids.exists()
    assert res.stderr.decode().splitlines()[1:] == [
        f'fatal: --declared-manifest {declared} declares the tools of server "{LABEL}", not of --label "other"'
    ]
