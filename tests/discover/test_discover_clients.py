"""discover reads every client of the table, from config files shaped like the real ones."""

from __future__ import annotations

import json

import pytest

from assay import clients
from assay import discover as d
from tests.discover._discover_helpers import EPOCH, config_only_policy, make_env, run_assay
from tests.protect._configs import CASES


def _location(label, scope):
    return next(r for r in clients.client_locations(label, "linux", "/h", {}, "/p") if r.scope == scope)


@pytest.mark.parametrize("label,scope,text,stdio,remote", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_each_client_config_lists_its_stdio_and_remote_servers(label, scope, text, stdio, remote):
    servers, errors = d.parse_config_file(text.encode(), _location(label, scope))
    assert errors == []
    assert [s["name"] for s in servers if s["transport"]["type"] == "stdio"] == stdio
    assert [s["name"] for s in servers if s["transport"]["type"] != "stdio"] == remote
    assert all(s["source"]["client"] == label and s["wrapped"] is False for s in servers)


def test_invalid_toml_is_an_error_entry():
    servers, errors = d.parse_config_file(b"[mcp_servers.a\n", _location("codex", "user"))
    assert servers == [] and len(errors) == 1 and errors[0]["error"].startswith("invalid TOML: ")


def test_discover_scans_every_client_file(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = make_env(home, SOURCE_DATE_EPOCH=EPOCH)
    expected = []
    for label, scope, text, stdio, remote in CASES:
        row = _location(label, scope)
        path = row.path.replace("/h", str(home), 1) if scope == "user" else row.path.replace("/p", str(work), 1)
        path = path.replace(f"{home}/.config", str(home / ".config"))
        target = tmp_path / path.lstrip("/") if not path.startswith(str(tmp_path)) else path
        target = type(tmp_path)(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        expected += [(label, name) for name in stdio + remote]
    policy = config_only_policy(tmp_path / "p.yaml")
    res = run_assay("mcp", "discover", "--format", "json", "--policy", str(policy), env=env, cwd=work)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["errors"] == []
    got = [(s["source"]["client"], s["name"]) for s in doc["servers"]]
    assert sorted(got) == sorted(expected)


def test_every_client_of_the_table_is_documented_with_its_source():
    from tests.conftest import REPO

    compat = (REPO / "docs" / "compatibility.md").read_text()
    table = compat[compat.index("## Client configs") :]
    config_path = (REPO / "docs" / "config-path.md").read_text()
    protect = (REPO / "docs" / "protect.md").read_text()
    for client in clients.CLIENTS:
        assert f"| {client.display} |" in table
        assert f"| {client.display} |" in config_path
        assert f"`{client.aliases[0]}`" in protect
