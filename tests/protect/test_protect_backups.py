"""Backups go into assay's state directory, 0600, the first and the newest 5 a config
(docs/protect.md, "Backups"), never next to the config or into a project's working tree."""

from __future__ import annotations

import os
import stat

from assay import clients
from assay.clients import protect as p
from tests.discover._discover_helpers import make_env, run_assay
from tests.protect._configs import CURSOR, VSCODE

OPTS = p.WrapOptions("/opt/venv/bin/assay", "/p.yaml")


def test_the_first_and_the_newest_five_backups_of_each_config_are_kept(tmp_path):
    state = tmp_path / "state"
    paths = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        path = tmp_path / name / "mcp.json"
        path.write_text(CURSOR)
        paths.append(path)
    loc = clients.client_locations("cursor", "linux", "/h", {}, "/w")[0]
    made: dict[str, list[str]] = {str(x): [] for x in paths}
    for i in range(7):
        for path in paths:
            edit = (
                (lambda t, ln, r: p.protect_text(t, ln, OPTS, r))
                if i % 2 == 0
                else (lambda t, ln, r: p.undo_text(t, ln, r))
            )
            out = p.apply_to_file(str(path), loc, edit, now=1000.0 + i, state=str(state))
            made[str(path)].append(out.backup)
            assert stat.S_IMODE(os.stat(out.backup).st_mode) == 0o600
    for path in paths:
        assert sorted(os.listdir(path.parent)) == ["mcp.json"]
        assert (
            sorted(
                os.path.join(state, "backups", n)
                for n in os.listdir(state / "backups")
                if p.state.config_digest(str(path)) in n
            )
            == made[str(path)][:1] + made[str(path)][-5:]
        )
        with open(made[str(path)][0]) as fh:  # the pristine config, before protect ever changed it
            assert fh.read() == CURSOR
    assert stat.S_IMODE(os.stat(state / "backups").st_mode) == 0o700


def test_cli_project_scope_leaves_no_backup_in_the_working_tree(tmp_path):
    home = tmp_path / "home"
    project = tmp_path / "project"
    (project / ".vscode").mkdir(parents=True)
    (project / ".vscode" / "mcp.json").write_text(VSCODE)
    policy = tmp_path / "p.yaml"
    policy.write_text('version: "2.0"\n')
    env = make_env(home)
    res = run_assay(
        "mcp", "protect", "vscode", "--scope", "project", "--policy", str(policy), "--absolute", env=env, cwd=project
    )
    assert res.returncode == 0, res.stderr
    backups = home / ".local" / "state" / "assay" / "backups"
    (backup,) = os.listdir(backups)
    assert f"backup: {backups / backup} (the first and the newest 5 of this file are kept)\n" in res.stdout.decode()
    assert (backups / backup).read_text() == VSCODE
    res = run_assay("mcp", "protect", "vscode", "--scope", "project", "--undo", env=env, cwd=project)
    assert res.returncode == 0, res.stderr
    assert sorted(os.listdir(project / ".vscode")) == ["mcp.json"]
    assert (project / ".vscode" / "mcp.json").read_text() == VSCODE
