"""What sent a new user the wrong way in their first week with protect and discover (issue 32,
point 11): each is a behaviour the docs now state, checked here.

- protect's help says it wraps remote servers too (docs/protect.md);
- its summary for a remote entry says the whole entry changed, not only command and args;
- the starter policy logs no call as a warning (every call was one, with no hint why), and no
  file protect writes points into docs/, which a pipx or uv install does not have;
- discover's AUTH column reads a Codex `http_headers` Authorization (and `env_http_headers`,
  `bearer_token_env_var`) and the headers of a protected remote entry (docs/discover.md).
"""

from __future__ import annotations

import json

import pytest

from assay import clients
from assay.clients import protect as p
from assay.clients.configs import parse_config_file
from assay.discover.report import build_document, render_table
from assay.policy import evaluate, load_policy
from tests.discover._discover_helpers import make_env, run_assay

OPTS = p.WrapOptions("/opt/venv/bin/assay", "/etc/assay/policy.yaml")


def test_the_help_says_remote_servers_are_wrapped_too(tmp_path):
    env = make_env(tmp_path)
    res = run_assay("mcp", "protect", "--help", env=env, cwd=tmp_path)
    text = res.stdout.decode()
    assert "every server, stdio or remote, runs under assay mcp wrap" in " ".join(text.split())
    assert "every stdio server" not in text
    res = run_assay("mcp", "--help", env=env, cwd=tmp_path)
    assert "every server, stdio or remote" in " ".join(res.stdout.decode().replace("│", " ").split())


def test_the_summary_of_a_remote_entry_says_the_whole_entry_changed(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(
        '{"mcpServers": {"notes": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer t"}}}}\n'
    )
    policy = tmp_path / "p.yaml"
    policy.write_text('version: "2.0"\n')
    env = make_env(tmp_path / "home")
    res = run_assay("mcp", "protect", "cursor", "--config", str(config), "--policy", str(policy), env=env, cwd=tmp_path)
    out = res.stdout.decode()
    assert res.returncode == 0, res.stderr
    assert "only the command and args values of the servers above changed" not in out
    assert (
        "only the servers above changed: a stdio server's command and args values, a remote server's whole "
        "entry (its URL, type and headers became command, args and env; its other members stay); the rest "
        "of the file is as it was\n"
    ) in out
    stdio = tmp_path / "stdio.json"
    stdio.write_text('{"mcpServers": {"fs": {"command": "npx", "args": ["srv"]}}}\n')
    res = run_assay("mcp", "protect", "cursor", "--config", str(stdio), "--policy", str(policy), env=env, cwd=tmp_path)
    assert (
        "only the command and args values of the servers above changed; the rest of the file is as it was\n"
        in res.stdout.decode()
    )


def test_the_starter_policy_logs_no_call_as_a_warning_and_points_into_no_docs_directory(tmp_path):
    policy = load_policy(p.STARTER_POLICY.encode())
    for tool in ("read_file", "write_file", "anything"):
        assert evaluate(policy, tool, {"path": "/x"}).outcome == "allow"
    assert "docs/" not in p.STARTER_POLICY and ".md" not in p.STARTER_POLICY
    assert "`assay mcp policy check --help`" in p.STARTER_POLICY
    # the help it points to says what the file's comments leave to it
    res = run_assay("mcp", "policy", "check", "--help", env=make_env(tmp_path), cwd=tmp_path)
    text = " ".join(res.stdout.decode().split())
    for key in ("schemas.<tool>", "path_confinement", "enforcement.unconstrained_tools", "inspect", "tools: allow"):
        assert key in text, key
    # protect's other writes (the record, the entries) point into no docs directory either
    config = tmp_path / "mcp.json"
    config.write_text(
        '{"mcpServers": {"fs": {"command": "npx", "args": ["srv"]}, '
        '"r": {"url": "https://h/mcp", "headers": {"A": "a"}}}}\n'
    )
    state = tmp_path / "state"
    loc = clients.pick_location("cursor", "user", str(config), "linux", "/h", {}, "/w")
    out = p.apply_to_file(str(config), loc, lambda t, ln, r: p.protect_text(t, ln, OPTS, r), state=str(state))
    for path in (config, out.record_path):
        assert "docs/" not in open(path).read()


CODEX_REMOTE = {
    "http_headers": '[mcp_servers.r]\nurl = "https://h/mcp"\nhttp_headers = { "Authorization" = "Bearer t" }\n',
    "env_http_headers": '[mcp_servers.r]\nurl = "https://h/mcp"\nenv_http_headers = { "X-Api-Key" = "API_KEY" }\n',
    "bearer_token_env_var": '[mcp_servers.r]\nurl = "https://h/mcp"\nbearer_token_env_var = "TOKEN"\n',
    "none": '[mcp_servers.r]\nurl = "https://h/mcp"\nhttp_headers = { "X-Client" = "me" }\n',
}


@pytest.mark.parametrize("case", sorted(CODEX_REMOTE))
def test_discover_reads_a_codex_remote_entrys_credentials(case):
    loc = clients.pick_location("codex", "user", "/tmp/config.toml", "linux", "/h", {}, "/w")
    servers, errors = parse_config_file(CODEX_REMOTE[case].encode(), loc)
    assert errors == []
    assert servers[0]["auth"] == ("none" if case == "none" else "api_key")
    table = render_table(
        build_document(servers, [], generated_at_ns=0, host={"hostname": "h", "os": "linux", "arch": "x"}), 0
    )
    row = next(line for line in table.splitlines() if line.startswith("codex-r"))
    assert ("None" if case == "none" else "ApiKey") in row.split()


def test_discover_reads_the_headers_of_a_protected_remote_entry():
    loc = clients.pick_location("cursor", "user", "/tmp/mcp.json", "linux", "/h", {}, "/w")
    text = '{"mcpServers": {"r": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer t"}}}}'
    protected = p.protect_text(text, loc, OPTS).text
    assert "ASSAY_HEADER_1" in protected
    servers, _ = parse_config_file(protected.encode(), loc)
    assert (servers[0]["wrapped"], servers[0]["auth"]) == (True, "api_key")
    assert "Bearer t" not in json.dumps(servers)
