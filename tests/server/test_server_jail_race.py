"""The policy-path jail under attack (docs/server.md, "Policy path jail"): a directory swapped
for a symlink out of the root while calls run, FIFOs and other non-regular files in the root,
and the same jail cases through both mechanisms (openat2 and the per-component walk)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from assay.server import policyfile
from assay.server.config import ServerConfig
from assay.server.errors import ToolError
from assay.server.log import Logger
from assay.server.policyfile import RootDir, open_policy
from assay.server.protocol import ServerProtocol
from tests.server._helpers import call, payload_of

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="renameat2 and openat2 are Linux calls")

MODES = ["openat2", "walk"]
if not policyfile._OPENAT2.available:
    MODES = ["walk"]

# A child process that swaps two names atomically (renameat2 RENAME_EXCHANGE) as fast as it can,
# after saying it is running; it stops when its stdin closes.
SWAPPER = textwrap.dedent(
    """
    import ctypes, os, sys, threading
    libc = ctypes.CDLL(None, use_errno=True)
    a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        print("unsupported", ctypes.get_errno(), flush=True)
        sys.exit(0)
    print("running", flush=True)
    while not stop.is_set():
        for _ in range(200):
            libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
    """
)


def _proto(root: Path, mode: str) -> ServerProtocol:
    logger = Logger(None, "info")
    proto = ServerProtocol(str(root), ServerConfig(cache_entries=0), logger)
    proto.ctx.rootdir.use_openat2 = mode == "openat2"
    return proto


def _decide(proto: ServerProtocol, policy: str) -> dict:
    line = json.dumps(call(1, "assay_policy_decide", {"tool": "secret_tool", "policy": policy})).encode()
    return payload_of(json.loads(proto.handle_blocking(line)))


def _race(proto: ServerProtocol, first, second, policy: str) -> dict[str, int]:
    """3,000 decide calls for ``policy`` while a child swaps ``first`` and ``second`` with
    renameat2(RENAME_EXCHANGE) in a tight loop; outcomes counted by kind (a leak reads the
    outside policy, which blocks ``secret_tool``)."""
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(first), str(second)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        state = swapper.stdout.readline().strip()
        if state != "running":
            pytest.skip(f"renameat2(RENAME_EXCHANGE) unavailable: {state}")
        outcomes: dict[str, int] = {}
        for _ in range(3000):
            p = _decide(proto, policy)
            if p.get("allowed") is False and "matches" in p:
                kind = "leak"
            elif p.get("allowed") is True:
                kind = "inside"
            else:
                kind = p["error"]["code"]
            outcomes[kind] = outcomes.get(kind, 0) + 1
    finally:
        swapper.stdin.close()
        swapper.wait(timeout=30)
        swapper.stdout.close()
    return outcomes


@pytest.mark.parametrize("mode", MODES)
def test_directory_swapped_for_an_outside_symlink_never_leaks(tmp_path, mode):
    """While a child process swaps `root/d` (a real directory) with `root/x` (a symlink to a
    directory outside the root) in a tight loop, 3,000 calls for `d/p.yaml` read the inside
    policy or are refused, never the outside one (the old realpath-then-open code leaked in
    about one call in seven)."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    outside.mkdir()
    (root / "d" / "p.yaml").write_text("blocklist: [other_tool]\n")  # inside: allowed
    (outside / "p.yaml").write_text("blocklist: [secret_tool]\n")  # outside: a leak is a block
    os.symlink(outside, root / "x")
    proto = _proto(root, mode)
    outcomes = _race(proto, root / "d", root / "x", "d/p.yaml")
    assert outcomes.get("leak", 0) == 0, outcomes
    assert outcomes.get("inside", 0) > 0, outcomes  # the calls did race with the swaps
    # A refusal is fine (a component may be seen as a link, then found to be a directory).
    assert set(outcomes) <= {"inside", "E_PERMISSION_DENIED", "E_POLICY_NOT_FOUND", "E_POLICY_READ"}, outcomes


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "p.yaml").write_text("blocklist: [t]\n")
    (tmp_path / "out.yaml").write_text("blocklist: [t]\n")
    os.symlink("sub/p.yaml", root / "rel_in.yaml")
    os.symlink(str(root / "sub" / "p.yaml"), root / "abs_in.yaml")
    os.symlink(str(root / "sub"), root / "abs_dir")
    os.symlink("../out.yaml", root / "rel_out.yaml")
    os.symlink("../../out.yaml", root / "sub" / "up_out.yaml")
    os.symlink("../p.yaml", root / "sub" / "self.yaml")  # sub/../p.yaml = root/p.yaml: missing
    os.symlink("../sub/p.yaml", root / "sub" / "back.yaml")
    os.symlink(str(tmp_path), root / "abs_out")
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.mkfifo(root / "fifo.yaml")
    os.symlink("fifo.yaml", root / "fifo_link.yaml")
    return root


CASES = [
    ("sub/p.yaml", None),
    ("rel_in.yaml", None),
    ("abs_in.yaml", None),
    ("abs_dir/p.yaml", None),
    ("sub/back.yaml", None),
    ("rel_out.yaml", ("E_PERMISSION_DENIED", "policy resolves outside policy_root")),
    ("sub/up_out.yaml", ("E_PERMISSION_DENIED", "policy resolves outside policy_root")),
    ("abs_out/out.yaml", ("E_PERMISSION_DENIED", "policy resolves outside policy_root")),
    ("sub/self.yaml", ("E_POLICY_NOT_FOUND", "Policy not found: sub/self.yaml")),
    ("missing/p.yaml", ("E_POLICY_NOT_FOUND", "Policy not found: missing/p.yaml")),
    ("sub/p.yaml/x", ("E_POLICY_READ", os.strerror(errno.ENOTDIR))),
    ("loop_a", ("E_POLICY_READ", os.strerror(errno.ELOOP))),
    ("sub", ("E_POLICY_READ", os.strerror(errno.EISDIR))),
    (".", ("E_POLICY_READ", os.strerror(errno.EISDIR))),
    ("fifo.yaml", ("E_POLICY_READ", "policy is not a regular file")),
    ("fifo_link.yaml", ("E_POLICY_READ", "policy is not a regular file")),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policy,expected", CASES)
def test_jail_cases_by_mechanism(tree, mode, policy, expected):
    """Both mechanisms give the same answers; a FIFO is refused at once (the open never waits
    for a writer, this test would hang otherwise)."""
    rootdir = RootDir(str(tree), use_openat2=mode == "openat2")
    try:
        if expected is None:
            fd, st = open_policy(rootdir, policy)
            try:
                assert os.read(fd, 100) == b"blocklist: [t]\n"
            finally:
                os.close(fd)
        else:
            with pytest.raises(ToolError) as info:
                open_policy(rootdir, policy)
            assert (info.value.code, info.value.message) == expected
    finally:
        rootdir.close()


def test_fifo_calls_do_not_wedge_the_server(serve, policy_root):
    """80 calls that name a FIFO (more than the 64 worker slots) are each refused at once, and
    `assay_server_identity` and a normal policy call still answer afterwards (before, each such
    call left a worker blocked in open() for good, and after 64 every call timed out)."""
    os.mkfifo(policy_root / "pipe.yaml")
    n = 80
    lines = [call(i, "assay_policy_decide", {"tool": "t", "policy": "pipe.yaml"}) for i in range(n)]
    lines.append(call(n, "assay_server_identity", {}))
    lines.append(call(n + 1, "assay_policy_decide", {"tool": "dangerous_tool", "policy": "blocklist_policy.yaml"}))
    s = serve(lines, env={"ASSAY_MCP_TIMEOUT_MS": "300"})
    r = s.responses
    assert [x["id"] for x in r] == list(range(n + 2))
    refused = {"allowed": False, "error": {"code": "E_POLICY_READ", "message": "policy is not a regular file"}}
    assert all(payload_of(x) == refused for x in r[:n])
    assert payload_of(r[n])["name"] == "assay-mcp-server"
    assert payload_of(r[n + 1])["matches"] == ["Tool 'dangerous_tool' is blocked by policy"]
    assert s.fields("tool_call_timeout") == []


@pytest.mark.parametrize("mode", MODES)
def test_single_name_swapped_for_an_outside_symlink_never_leaks(tmp_path, mode):
    """A policy named by one component is opened with a plain no-follow open first. While a
    child swaps `root/p.yaml` (a regular file) with `root/l.yaml` (a symlink to a file outside
    the root), 3,000 calls for `p.yaml` read the inside policy or are refused, never the outside
    one."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "p.yaml").write_text("blocklist: [other_tool]\n")  # inside: allowed
    (tmp_path / "out.yaml").write_text("blocklist: [secret_tool]\n")  # outside: a leak is a block
    os.symlink(tmp_path / "out.yaml", root / "l.yaml")
    proto = _proto(root, mode)
    outcomes = _race(proto, root / "p.yaml", root / "l.yaml", "p.yaml")
    assert outcomes.get("leak", 0) == 0, outcomes
    assert outcomes.get("inside", 0) > 0, outcomes
    # A refusal is fine (the name may be seen as a link, then found to be a file).
    assert set(outcomes) <= {"inside", "E_PERMISSION_DENIED", "E_POLICY_NOT_FOUND", "E_POLICY_READ"}, outcomes
