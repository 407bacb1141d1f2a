"""`assay mcp serve --config F --check` as a real process (docs/serve.md, "Checking a config"):
exit 0/1/2, one line per problem on stderr, never a traceback, never a secret's value."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ASSAY = str(Path(sys.executable).parent / "assay")
POLICY = 'version: "2.0"\ntools:\n  allow: ["*"]\n'


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [ASSAY, "mcp", "serve", *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


def setup(tmp: Path, config: str, policy: str = POLICY) -> Path:
    (tmp / "assay.yaml").write_text(policy)
    path = tmp / "serve.yaml"
    path.write_text(config)
    return path


CONFIG = """\
policy: assay.yaml
identity: {api_keys: keys.txt}
upstreams:
  files: {command: [python3, server.py]}
  search: {url: "http://127.0.0.1:9/mcp", credential: {header: Authorization, prefix: "Bearer ", value: {env: SEARCH_TOKEN}}}
"""


def test_a_usable_config_is_ok(tmp_path):
    cfg = setup(tmp_path, CONFIG)
    (tmp_path / "keys.txt").write_text("alice sha256:" + "0" * 64 + "\n")
    res = run("--config", str(cfg), "--check", env={"SEARCH_TOKEN": "s3cr3t-value"})
    assert (res.returncode, res.stdout, res.stderr) == (0, "serve.yaml: ok (2 upstreams, identity: api_keys)\n", "")


def test_what_cannot_be_used_now_is_exit_1_and_names_no_secret(tmp_path):
    cfg = setup(tmp_path, CONFIG)
    res = run("--config", str(cfg), "--check", env={"SEARCH_TOKEN": ""})
    assert res.returncode == 1, res.stderr
    lines = res.stderr.splitlines()
    assert lines[0] == "serve.yaml: upstreams.search.credential.value: the variable SEARCH_TOKEN is not set"
    assert lines[1].startswith("serve.yaml: identity.api_keys: ") and len(lines) == 2
    assert "Traceback" not in res.stderr and res.stdout == ""


def test_an_invalid_config_is_exit_2_one_line_each(tmp_path):
    cfg = setup(tmp_path, "policy: assay.yaml\nlisten: 0.0.0.0:80\nidentity: {none: true}\nupstreams: {a: {}}\nx: 1\n")
    res = run("--config", str(cfg), "--check")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [
        "serve.yaml: x: unknown key (known: version, policy, listen, public_url, tls, origins, identity, store, "
        "state_dir, separator, limits, approval_key, session_key, session_key_previous, approvals, upstreams, logs,"
        " admin_listen, otel)",
        "serve.yaml: identity.none: no authentication is only allowed on a loopback address, not 0.0.0.0",
        "serve.yaml: upstreams.a: needs exactly one of command (a list of strings) or url",
    ]


def test_a_policy_that_does_not_load_is_exit_2(tmp_path):
    cfg = setup(tmp_path, "policy: assay.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n", "tools: [\n")
    res = run("--config", str(cfg), "--check")
    assert res.returncode == 2 and "assay.yaml" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.splitlines()) == 1


def test_a_policy_with_an_unknown_key_is_exit_1(tmp_path):
    cfg = setup(
        tmp_path,
        "policy: assay.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n",
        POLICY + "toolz: {}\n",
    )
    res = run("--config", str(cfg), "--check")
    assert res.returncode == 1 and "unknown key ignored: toolz" in res.stderr


def test_a_config_that_is_not_a_file_is_exit_2(tmp_path):
    res = run("--config", str(tmp_path), "--check")
    assert (
        res.returncode == 2 and res.stderr.startswith("fatal: cannot read config") and len(res.stderr.splitlines()) == 1
    )
    res = run("--config", "/dev/zero", "--check")
    assert res.returncode == 2 and "not a regular file" in res.stderr
    res = run("--config", str(tmp_path / "absent.yaml"), "--listen", "nowhere", "--check")
    assert res.returncode == 2


def test_a_bad_api_key_file_is_exit_1_and_a_bad_oauth_section_exit_2(tmp_path):
    cfg = setup(tmp_path, CONFIG)
    (tmp_path / "keys.txt").write_text("alice sha256:" + "0" * 64 + "\nalice sha256:" + "1" * 64 + "\n")
    res = run("--config", str(cfg), "--check", env={"SEARCH_TOKEN": "x"})
    assert res.returncode == 1 and "alice" in res.stderr and "1111" not in res.stderr
    cfg = setup(
        tmp_path,
        "policy: assay.yaml\nidentity: {oauth: {issuer: 'ftp://i', jwks_url: https://i.example/k, audience: a}}\n"
        "upstreams: {a: {command: [x]}}\n",
    )
    res = run("--config", str(cfg), "--check")
    assert res.returncode == 2 and res.stderr.startswith("serve.yaml: identity.oauth.issuer"), res.stderr


def test_listen_override_is_checked(tmp_path):
    cfg = setup(tmp_path, "policy: assay.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n")
    res = run("--config", str(cfg), "--listen", "nowhere", "--check")
    assert res.returncode == 2 and res.stderr.startswith("fatal: --listen nowhere: expected host:port")


def test_an_address_in_use_is_one_line_and_exit_2(tmp_path):
    import socket

    cfg = setup(tmp_path, "policy: assay.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = run("--config", str(cfg), "--listen", f"127.0.0.1:{port}")
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines()[-1] == f"fatal: cannot serve on 127.0.0.1:{port}: Address already in use"
    assert "Traceback" not in res.stderr


def test_an_approval_key_shorter_than_16_bytes_cannot_be_used(tmp_path):
    cfg = setup(tmp_path, CONFIG + "approval_key: {file: approval.key}\n")
    (tmp_path / "keys.txt").write_text("alice sha256:" + "0" * 64 + "\n")
    (tmp_path / "approval.key").write_text("short-key\n")
    res = run("--config", str(cfg), "--check", env={"SEARCH_TOKEN": "s3cr3t-value"})
    assert res.returncode == 1 and res.stderr.splitlines() == [
        "serve.yaml: approval_key: the key must be at least 16 bytes"
    ], res.stderr
    assert "short-key" not in res.stderr
    (tmp_path / "approval.key").write_text("a-key-of-sixteen-bytes\n")
    assert run("--config", str(cfg), "--check", env={"SEARCH_TOKEN": "s3cr3t-value"}).returncode == 0


def test_a_token_exchange_no_identity_could_feed_is_exit_2_one_line(tmp_path):
    # docs/serve.md, "Credentials to upstreams": only an OAuth user has a token to exchange
    exchange = (
        "  tickets:\n    url: https://tickets.example/mcp\n    credential:\n      token_exchange:"
        " {token_url: https://issuer.example/token, client_id: gw, client_secret: {env: GW_SECRET},"
        " audience: tickets}\n"
    )
    (tmp_path / "keys.txt").write_text("alice sha256:" + "0" * 64 + "\n")
    want = (
        "serve.yaml: upstreams.tickets.credential.token_exchange: needs the user's OAuth token, and identity has"
        " no oauth (API keys and no authentication give none): no user could use this upstream"
    )
    for identity in ("{api_keys: keys.txt}", "{none: true}"):
        cfg = setup(tmp_path, f"policy: assay.yaml\nidentity: {identity}\nupstreams:\n{exchange}")
        for args in (("--check",), ()):
            res = run("--config", str(cfg), *args, env={"GW_SECRET": "s"})
            assert (res.returncode, res.stdout, res.stderr.splitlines()) == (2, "", [want]), identity
