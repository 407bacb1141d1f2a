"""`assay mcp kill` on real processes (docs/kill.md).

Every process here is one the test started; each test reaps it, or stops the grandchild it
made, in ``finally``. Waits are pidfd events with generous timeouts, never sleeps.
"""

from __future__ import annotations

import json
import signal

from tests.discover._discover_helpers import (
    gone_within,
    make_env,
    run_assay,
    start_plain,
    start_server,
    start_wrap,
    unused_pid,
    write_json,
)


def _kill(tmp_path, *args):
    return run_assay("mcp", "kill", *args, env=make_env(tmp_path), cwd=tmp_path)


def test_D32_kill_children_leaves_no_orphan(tmp_path):
    server = start_server(tmp_path, "--child")
    try:
        assert not gone_within(server.child, 0)
        res = _kill(tmp_path, str(server.pid), "--kill-children")
        assert res.returncode == 0, res.stderr
        assert res.stdout.decode() == f"✓ killed pid={server.pid}\n  children killed: 1\n"
        assert res.stderr == b""
        assert server.proc.wait(timeout=30) == -signal.SIGTERM  # graceful by default (docs/kill.md, `--mode`)
        assert gone_within(server.child, 30), "the server's child was orphaned"
    finally:
        server.close()


def test_D32_without_kill_children_the_child_survives(tmp_path):
    """The counterpart: the same kill without --kill-children leaves the child running."""
    server = start_server(tmp_path, "--child")
    try:
        res = _kill(tmp_path, f"proc-{server.pid}")
        assert res.returncode == 0, res.stderr
        assert res.stdout.decode() == f"✓ killed pid={server.pid}\n"
        assert server.proc.wait(timeout=30) == -signal.SIGTERM
        assert not gone_within(server.child, 0.2)
    finally:
        server.close()  # stops the surviving child too


def test_D31a_refuses_a_process_that_is_not_an_mcp_server(tmp_path):
    plain = start_plain(tmp_path)
    try:
        res = _kill(tmp_path, str(plain.pid))
        assert res.returncode == 30
        assert res.stdout == b""
        assert res.stderr.decode() == (
            f"✗ refusing to kill pid={plain.pid}: not an MCP server process (use --force to kill it anyway)\n"
        )
        assert plain.proc.poll() is None and not gone_within(plain.pid, 0.2)
        res = _kill(tmp_path, str(plain.pid), "--force", "--mode", "immediate")
        assert res.returncode == 0, res.stderr
        assert res.stdout.decode() == f"✓ killed pid={plain.pid}\n"
        assert plain.proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        plain.close()


def test_D31b_not_found_is_a_failure(tmp_path):
    pid = unused_pid()
    for args in ((str(pid),), (f"proc-{pid}", "--force"), ("4294967295",)):
        res = _kill(tmp_path, *args)
        assert res.returncode == 30, args
        assert res.stdout == b""
        assert res.stderr.decode().endswith(": no such process\n")


def test_D31b_graceful_escalates_to_sigkill_after_grace(tmp_path):
    server = start_server(tmp_path, "--ignore-term")
    try:
        res = _kill(tmp_path, str(server.pid), "--grace", "200ms")
        assert res.returncode == 0, res.stderr
        assert server.proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        server.close()


def test_K5_immediate_mode_sends_sigkill(tmp_path):
    server = start_server(tmp_path)
    try:
        res = _kill(tmp_path, str(server.pid), "--mode", "immediate")
        assert res.returncode == 0, res.stderr
        assert server.proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        server.close()


def test_D31a_a_wrap_and_the_server_it_runs_are_mcp_server_processes(tmp_path):
    wrap = start_wrap(tmp_path, "plain_server.py")
    try:
        # the wrapped server's argv has no MCP marker: it is accepted because a wrap runs it
        res = _kill(tmp_path, str(wrap.child))
        assert res.returncode == 0, res.stderr
        assert gone_within(wrap.child, 30)
        res = _kill(tmp_path, str(wrap.pid))
        assert res.returncode == 0, res.stderr
        assert wrap.proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        wrap.close()


def test_K1_K2_targets_resolved_through_an_inventory(tmp_path):
    server = start_server(tmp_path)
    inv = write_json(
        tmp_path / "inv.json",
        {
            "servers": [
                {
                    "id": "cursor-a",
                    "name": "a",
                    "status": "configured",
                    "source": {"type": "config_file", "path": "/x", "client": "cursor"},
                },
                {
                    "id": "my-server",
                    "name": None,
                    "status": "running",
                    "source": {"type": "running_process", "pid": server.pid},
                },
            ]
        },
    )
    try:
        res = _kill(tmp_path, "cursor-a", "--inventory", str(inv))
        assert res.returncode == 30
        assert res.stderr.decode() == '✗ Could not resolve target "cursor-a" to a PID (not running process?)\n'
        res = _kill(tmp_path, "nothing-here")  # default .assay/inventory.yaml is absent
        assert res.returncode == 30
        # one error line in the style of the other failures (it used to be a "Warning:")
        assert res.stderr.decode() == (
            '✗ Could not resolve target "nothing-here": cannot read .assay/inventory.yaml: No such file or '
            "directory (write an inventory with: assay mcp discover --format yaml -o .assay/inventory.yaml)\n"
        )
        res = _kill(tmp_path, "my-server", str(server.pid), "--inventory", str(inv))
        assert res.returncode == 0, res.stderr
        assert res.stdout.decode() == f"✓ killed pid={server.pid}\n"  # one pid, killed once
        assert server.proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        server.close()


def test_K3_all_needs_yes_and_uses_running_entries(tmp_path):
    s1 = start_server(tmp_path)
    s2 = start_server(tmp_path)
    try:
        # an inventory written by discover itself, in its default place
        (tmp_path / ".assay").mkdir()
        res = run_assay(
            "mcp",
            "discover",
            "--format",
            "yaml",
            "-o",
            ".assay/inventory.yaml",
            env=make_env(tmp_path / "h"),
            cwd=tmp_path,
        )
        assert res.returncode == 0, res.stderr
        res = _kill(tmp_path, "--all")
        assert res.returncode == 2
        assert res.stderr.decode() == "fatal: Refusing to --all without --yes (safety).\n"
        assert s1.proc.poll() is None
        # keep only our two servers in the inventory: --all must never reach other processes
        import yaml

        path = tmp_path / ".assay" / "inventory.yaml"
        doc = yaml.safe_load(path.read_text())
        doc["servers"] = [s for s in doc["servers"] if s["source"].get("pid") in (s1.pid, s2.pid)]
        assert len(doc["servers"]) == 2
        path.write_text(yaml.safe_dump(doc))
        res = _kill(tmp_path, "--all", "--yes", "ignored-target")
        assert res.returncode == 0, res.stderr
        first, second = sorted((s1.pid, s2.pid))
        assert res.stdout.decode() == f"Found 2 running servers to kill.\n✓ killed pid={first}\n✓ killed pid={second}\n"
        assert s1.proc.wait(timeout=30) == -signal.SIGTERM and s2.proc.wait(timeout=30) == -signal.SIGTERM
        path.write_text(json.dumps({"servers": []}))
        res = _kill(tmp_path, "--all", "--yes")
        assert (res.returncode, res.stdout.decode()) == (0, "No running process-based servers found in inventory.\n")
    finally:
        s1.close()
        s2.close()


def test_K4_usage_errors(tmp_path):
    res = _kill(tmp_path)
    assert (res.returncode, res.stdout) == (2, b"")
    assert res.stderr.decode() == "fatal: Provide at least one target, or use --all.\n"
    for args in (("--grace", "soon", "1"), ("--mode", "brutal", "1"), ("--capture-state", "1"), ("--reason", "x", "1")):
        res = _kill(tmp_path, *args)
        assert res.returncode == 2, args
        assert res.stderr.startswith(b"assay: error: ") and res.stderr.count(b"\n") == 1, res.stderr
