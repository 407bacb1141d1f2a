"""`assay-mcp-server` startup contract (docs/server.md, "Running it").

The protocol itself is tested under tests/server/. These pin the behaviour preflight relies on.
"""

from __future__ import annotations

import json
import subprocess
import sys

from assay import __version__
from tests.conftest import SERVER


def run(args, env, stdin: bytes = b"", cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SERVER), *args], input=stdin, env=env, cwd=cwd, capture_output=True, timeout=60)


def fatal_text(res: subprocess.CompletedProcess) -> str:
    """stderr without the JSON log events (C4 logs server_start before the root check)."""
    lines = res.stderr.decode().splitlines(keepends=True)
    for line in lines:
        if line.startswith("{"):
            json.loads(line)  # every non-fatal line must be a JSON event
    return "".join(line for line in lines if not line.startswith("{"))


def test_version_line_exact(base_env):
    """Exactly `assay-mcp-server <version>\\n` (the package version), exit 0, nothing on stderr."""
    for flag in ("--version", "-V"):
        res = run([flag], base_env)
        assert res.returncode == 0
        assert res.stdout == f"assay-mcp-server {__version__}\n".encode()
        assert res.stderr == b""


def test_version_works_even_with_auth_env(base_env):
    """C2: arguments are parsed first, so --version works with ASSAY_AUTH_* set."""
    res = run(["--version"], dict(base_env, ASSAY_AUTH_TOKEN="s3cret"))
    assert res.returncode == 0 and res.stdout.startswith(b"assay-mcp-server ")


def test_auth_env_refused_names_sorted_values_hidden(tmp_path, base_env):
    """C5: any ASSAY_AUTH_* (case-insensitive prefix) -> exit 1, one line, names sorted, no values."""
    env = dict(base_env, ASSAY_AUTH_ZED="v1", assay_auth_token="v2", Assay_Auth_A="v3")
    res = run(["--policy-root", str(tmp_path)], env)
    assert res.returncode == 1
    assert res.stdout == b""
    assert res.stderr.decode() == (
        "assay-mcp-server: ASSAY_AUTH_* configuration is unsupported for stdio server modes; "
        "unset: ASSAY_AUTH_ZED, Assay_Auth_A, assay_auth_token\n"
    )
    for value in (b"v1", b"v2", b"v3"):
        assert value not in res.stderr


def test_missing_root_exits_1_with_strerror(tmp_path, base_env):
    """docs/server.md, "Running it": missing root -> `invalid --policy-root: <strerror>`, no `(os error N)`."""
    res = run(["--policy-root", str(tmp_path / "nope")], base_env)
    assert res.returncode == 1
    assert fatal_text(res) == "assay-mcp-server: invalid --policy-root: No such file or directory\n"
    events = [json.loads(ln) for ln in res.stderr.decode().splitlines() if ln.startswith("{")]
    assert [e["fields"].get("event") for e in events][:1] == ["server_start"]  # C4: logged before the root check


def test_default_root_is_policies_relative_to_cwd(tmp_path, base_env):
    """C1 table: default `policies` relative to the working directory."""
    res = run([], base_env, cwd=tmp_path)
    assert res.returncode == 1 and b"invalid --policy-root" in res.stderr
    (tmp_path / "policies").mkdir()
    res = run([], base_env, cwd=tmp_path)
    assert res.returncode == 0


def test_root_not_a_directory(tmp_path, base_env):
    f = tmp_path / "file.yaml"
    f.write_text("x")
    res = run(["--policy-root", str(f)], base_env)
    assert res.returncode == 1
    assert fatal_text(res) == f"assay-mcp-server: invalid --policy-root: not a directory: {f}\n"


def test_every_fatal_line_is_prefixed_even_from_a_path_with_newlines(tmp_path, base_env):
    """C7: a newline inside the path cannot make a line that passes for a JSON log event."""
    evil = tmp_path / 'a\n{"event":"fake"}\rb'
    evil.write_text("x")
    res = run(["--policy-root", str(evil)], base_env)
    assert res.returncode == 1
    lines = fatal_text(res).splitlines()
    assert len(lines) == 3
    assert all(line.startswith("assay-mcp-server: ") for line in lines)


def test_clean_eof_exits_zero(tmp_path, base_env):
    """C7: with a valid root, EOF on stdin ends the server with exit 0."""
    res = run(["--policy-root", str(tmp_path)], base_env, stdin=b"")
    assert res.returncode == 0
    assert res.stdout == b""


def test_usage_errors_exit_2(tmp_path, base_env):
    """C1/C8: unknown flag, missing value, repeated --policy-root, unknown subcommand -> exit 2."""
    cases = [
        ["--bogus"],
        ["--policy-root"],
        ["--policy-root", str(tmp_path), "--policy-root", str(tmp_path)],
        ["proxy"],
    ]
    for args in cases:
        res = run(args, base_env)
        assert res.returncode == 2, args
        assert res.stdout == b""
        assert res.stderr.count(b"\n") == 1 and res.stderr.startswith(b"assay-mcp-server: ")


def test_startup_path_imports_no_heavy_modules(tmp_path):
    """C3: --version and root validation must not load trio, yaml or jsonschema (2 s probes)."""
    code = (
        "import sys\n"
        "from assay.server.main import main\n"
        "main(['--version'])\n"
        "heavy = sorted(m for m in ('trio', 'yaml', 'jsonschema_rs', 'cyclopts', 'cryptography') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "[]"
