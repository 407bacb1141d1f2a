"""One policy file entry for every command (docs/policy.md, "Loading" and "File ceilings"):
`assay mcp wrap`, `discover` and `protect` call assay.policy.load_policy_file, the server hands
the file its jail opened to the same reader and budget. A policy over the ceiling, a FIFO,
/dev/zero and a YAML bomb under a low ceiling are refused the same way everywhere."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import trio

from assay.clients.protect import check_policy
from assay.policy import PolicyError, PolicyFileError, load_policy_file, read_policy_fd
from assay.wrap.run import WrapConfig, WrapError, child_environment, run_wrap
from tests.conftest import ASSAY
from tests.server._helpers import call, payload_of, run_server

CEILING = 2000
BUDGET = 4 * CEILING  # docs/policy.md, "Loading": four times the ceiling, in scalar characters


def _bomb() -> bytes:
    """Under 2,000 bytes, 10,000 scalar characters once its aliases are expanded."""
    aliases = ", ".join(["*s"] * 99)
    return f'version: "2.0"\nschemas:\n  t: {{enum: [&s "{"A" * 100}", {aliases}]}}\n'.encode()


def _cases(d) -> dict[str, tuple[str, str]]:
    """name -> (path, the one-line message every command prints)."""
    (d / "big.yaml").write_bytes(b"#" * (CEILING + 1))
    os.mkfifo(d / "fifo.yaml")
    (d / "bomb.yaml").write_bytes(_bomb())
    assert len(_bomb()) < CEILING
    return {
        "big": (str(d / "big.yaml"), f"cannot read policy {d / 'big.yaml'}: larger than the {CEILING}-byte limit"),
        "fifo": (str(d / "fifo.yaml"), f"cannot read policy {d / 'fifo.yaml'}: not a regular file (a FIFO)"),
        "zero": ("/dev/zero", "cannot read policy /dev/zero: not a regular file (a character device)"),
        "bomb": (
            str(d / "bomb.yaml"),
            f"{d / 'bomb.yaml'}: document expands to more than {BUDGET} characters of scalars once aliases "
            "are expanded (alias expansion refused)",
        ),
    }


@pytest.fixture
def cases(tmp_path):
    return _cases(tmp_path)


@pytest.fixture
def low_ceiling(base_env):
    return {**base_env, "ASSAY_MCP_MAX_POLICY_BYTES": str(CEILING)}


@pytest.mark.parametrize("case", ["big", "fifo", "zero", "bomb"])
def test_the_library_entry_and_protect(cases, case, monkeypatch):
    path, message = cases[case]
    monkeypatch.setenv("ASSAY_MCP_MAX_POLICY_BYTES", str(CEILING))
    with pytest.raises((PolicyFileError, PolicyError)) as info:
        load_policy_file(path)
    assert str(info.value) == message
    assert check_policy(path) == message  # assay mcp protect --policy


def test_the_budget_follows_the_ceiling(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_bytes(_bomb())
    assert load_policy_file(str(path), limit=1_000_000).schemas["t"]["enum"][0] == "A" * 100
    with pytest.raises(PolicyError, match=f"more than {BUDGET} characters"):
        load_policy_file(str(path), limit=CEILING)


@pytest.mark.parametrize("case", ["big", "fifo", "zero", "bomb"])
def test_wrap_and_discover_print_the_same_line(cases, case, low_ceiling, tmp_path):
    path, message = cases[case]
    marker = tmp_path / "spawned"
    wrap = subprocess.run(
        [str(ASSAY), "mcp", "wrap", "--policy", path, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
        capture_output=True,
        text=True,
        timeout=60,
        env=low_ceiling,
        stdin=subprocess.DEVNULL,
    )
    assert wrap.returncode == 2 and "Traceback" not in wrap.stderr
    assert wrap.stderr.splitlines()[-1] == f"fatal: {message}"
    assert not marker.exists()
    discover = subprocess.run(
        [str(ASSAY), "mcp", "discover", "--policy", path],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**low_ceiling, "HOME": str(tmp_path)},
        stdin=subprocess.DEVNULL,
    )
    assert discover.returncode == 2 and discover.stderr.strip() == f"fatal: {message}"


def test_run_wrap_refuses_before_spawning(cases, tmp_path):
    path, message = cases["bomb"]
    marker = tmp_path / "spawned"
    config = WrapConfig(argv=[sys.executable, "-c", f"open({str(marker)!r}, 'w')"], policy_path=path)
    lines: list[str] = []
    with pytest.raises(WrapError) as info:
        trio.run(lambda: run_wrap(config, warn=lines.append, environ={"ASSAY_MCP_MAX_POLICY_BYTES": str(CEILING)}))
    assert str(info.value) == message and not marker.exists()
    assert lines == [f"[assay] loading policy from {path}"]  # said once the bytes are read
    with pytest.raises(WrapError) as info:
        trio.run(lambda: run_wrap(WrapConfig(argv=["x"], policy_path=cases["fifo"][0]), warn=lines.append, environ={}))
    assert str(info.value) == f"cannot read policy {cases['fifo'][0]}: not a regular file (a FIFO)"


def test_the_server_refuses_the_same_files(tmp_path, low_ceiling):
    """The server's jail opens the file and hands it to the same reader and budget; its answers
    are its documented errors (docs/server.md, "Policy path jail", "Error catalogue")."""
    root = tmp_path / "root"
    root.mkdir()
    _cases(root)
    (root / "ok.yaml").write_bytes(b'version: "2.0"\ntools: {allow: [t]}\n')

    def check(i, name):
        return call(i, "assay_check_args", {"tool": "t", "arguments": {}, "policy": name})

    s = run_server(
        root, [check(1, "big.yaml"), check(2, "fifo.yaml"), check(3, "bomb.yaml"), check(4, "ok.yaml")], low_ceiling
    )
    got = [payload_of(r) for r in s.responses]
    assert got[0] == {
        "allowed": False,
        "error": {"code": "E_LIMIT_EXCEEDED", "message": "policy file exceeds the configured byte limit"},
    }
    assert got[1] == {"allowed": False, "error": {"code": "E_POLICY_READ", "message": "policy is not a regular file"}}
    assert got[2] == {"allowed": False, "error": {"code": "E_POLICY_PARSE", "message": "Policy structure is invalid"}}
    assert got[3]["allowed"] is True


def test_every_server_tool_sizes_the_yaml_budget_from_the_servers_ceiling(tmp_path, base_env, low_ceiling):
    """The sequence, blocklist and v1.1 tools read their YAML under the same budget as
    assay_check_args: four times ASSAY_MCP_MAX_POLICY_BYTES (docs/policy.md, "File ceilings"),
    not the default ceiling's."""
    root = tmp_path / "root"
    root.mkdir()
    aliases = ", ".join(["*s"] * 99)  # 10,000 scalar characters once expanded, under 2,000 bytes
    (root / "seq.yaml").write_bytes(
        f'version: "1.1"\ntools: {{allow: [&s "{"A" * 100}", {aliases}]}}\nsequences: [{{type: before, first: Search, then: Create}}]\n'.encode()
    )
    (root / "block.yaml").write_bytes(f'blocklist: [&s "{"A" * 100}", {aliases}]\n'.encode())
    assert all(len((root / n).read_bytes()) < CEILING for n in ("seq.yaml", "block.yaml"))
    requests = [
        call(1, "assay_check_sequence", {"history": [], "next_tool": "t", "policy": "seq.yaml"}),
        call(2, "assay_policy_decide", {"tool": "t", "policy": "block.yaml"}),
        call(3, "assay_check_coverage", {"policy": "seq.yaml", "traces": []}),
    ]
    low = [payload_of(r) for r in run_server(root, requests, low_ceiling).responses]
    for got in low:
        assert got.get("error", {}).get("code") == "E_POLICY_PARSE", got
    high = [payload_of(r) for r in run_server(root, requests, base_env).responses]
    assert high[0]["allowed"] is True and high[1]["allowed"] is True and "tool_coverage" in high[2], high
    assert all(got.get("error", {}).get("code") != "E_POLICY_PARSE" for got in high), high


def test_read_policy_fd_caps_an_open_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_bytes(b"x" * 11)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert read_policy_fd(fd, limit=11) == b"x" * 11
        os.lseek(fd, 0, os.SEEK_SET)
        with pytest.raises(PolicyFileError) as info:
            read_policy_fd(fd, limit=10, source="p.yaml")
        assert info.value.too_large and str(info.value) == "cannot read policy p.yaml: larger than the 10-byte limit"
    finally:
        os.close(fd)


# -- strictness is a value (docs/wrap.md, "Options": --deny-deprecations) ------------------------

V1 = b'constraints:\n  - tool: t\n    params: {p: {matches: "^a$"}}\n'


def test_deny_deprecations_is_passed_as_a_value_and_never_written_to_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("ASSAY_STRICT_DEPRECATIONS", raising=False)
    path = tmp_path / "v1.yaml"
    path.write_bytes(V1)
    config = WrapConfig(argv=["x"], policy_path=str(path), deny_deprecations=True)
    with pytest.raises(WrapError, match="Strict mode: v1 policy format"):
        trio.run(lambda: run_wrap(config, warn=lambda _line: None))
    assert "ASSAY_STRICT_DEPRECATIONS" not in os.environ
    plain = WrapConfig(argv=["x"], policy_path=str(path))
    with pytest.raises(WrapError, match="Strict mode: v1 policy format"):  # the variable alone
        trio.run(lambda: run_wrap(plain, warn=lambda _line: None, environ={"ASSAY_STRICT_DEPRECATIONS": "1"}))


def test_the_wrapped_server_inherits_the_strict_mode():
    on = WrapConfig(argv=["x"], deny_deprecations=True)
    assert child_environment(on, {"A": "1"}) == {"A": "1", "ASSAY_STRICT_DEPRECATIONS": "1"}
    assert child_environment(WrapConfig(argv=["x"]), os.environ) is None  # inherited as is
    assert child_environment(WrapConfig(argv=["x"], env={"B": "2"}, deny_deprecations=True), {"A": "1"}) == {"B": "2"}


def test_deny_deprecations_reaches_the_wrapped_process(tmp_path, base_env):
    path = tmp_path / "ok.yaml"
    path.write_bytes(b'version: "2.0"\n')
    probe = "import os, sys; sys.stderr.write('strict=' + os.environ.get('ASSAY_STRICT_DEPRECATIONS', '-') + '\\n')"
    for flags, want in (([], "strict=-"), (["--deny-deprecations"], "strict=1")):
        res = subprocess.run(
            [str(ASSAY), "mcp", "wrap", *flags, "--policy", str(path), "--", sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            timeout=60,
            env=base_env,
            stdin=subprocess.DEVNULL,
        )
        assert want in res.stderr.splitlines(), res.stderr
