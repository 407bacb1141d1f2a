"""`--scope project` (docs/protect.md, "Project scope"): a project file is shared, and assay
cannot write an entry that works on a teammate's machine, so it refuses unless --absolute says
to write this machine's paths anyway."""

from __future__ import annotations

import json
import os

from tests.conftest import ASSAY
from tests.discover._discover_helpers import make_env, run_assay

MCP_JSON = json.dumps({"mcpServers": {"fs": {"command": "npx", "args": ["-y", "srv"]}}}, indent=2) + "\n"


def _project(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / ".mcp.json").write_text(MCP_JSON)
    return home, proj


def test_project_scope_is_refused_without_absolute(tmp_path):
    home, proj = _project(tmp_path)
    res = run_assay(
        "mcp",
        "protect",
        "claude-code",
        "--scope",
        "project",
        "--policy",
        "policy.yaml",
        "--init-policy",
        env=make_env(home),
        cwd=proj,
    )
    err = res.stderr.decode()
    assert (res.returncode, res.stdout) == (2, b"")
    assert err.startswith("assay: error: --scope project writes a file your team shares") and err.count("\n") == 1
    assert "add --absolute to write this machine's paths" in err
    assert (proj / ".mcp.json").read_text() == MCP_JSON and sorted(os.listdir(proj)) == [".mcp.json"]


def test_absolute_writes_this_machines_paths_and_says_so(tmp_path):
    home, proj = _project(tmp_path)
    env = make_env(home)
    res = run_assay(
        "mcp",
        "protect",
        "claude-code",
        "--scope",
        "project",
        "--policy",
        "policy.yaml",
        "--init-policy",
        "--absolute",
        env=env,
        cwd=proj,
    )
    assert res.returncode == 0, res.stderr
    assert "note: the project file now holds this machine's paths (assay, policy, log dir)" in res.stdout.decode()
    entry = json.loads((proj / ".mcp.json").read_text())["mcpServers"]["fs"]
    assert entry["command"] == str(ASSAY)
    assert entry["args"][:4] == ["mcp", "wrap", "--policy", str(proj / "policy.yaml")]
    # undo needs no --absolute (it writes no path of this machine)
    res = run_assay("mcp", "protect", "claude-code", "--scope", "project", "--undo", env=env, cwd=proj)
    assert res.returncode == 0, res.stderr
    assert (proj / ".mcp.json").read_text() == MCP_JSON
    assert "note:" not in res.stdout.decode()


def test_user_scope_and_config_need_no_absolute(tmp_path):
    home, proj = _project(tmp_path)
    (proj / "p.yaml").write_text('version: "2.0"\n')
    res = run_assay(
        "mcp",
        "protect",
        "claude-code",
        "--config",
        str(proj / ".mcp.json"),
        "--policy",
        "p.yaml",
        env=make_env(home),
        cwd=proj,
    )
    assert res.returncode == 0, res.stderr
    assert "note:" not in res.stdout.decode()
