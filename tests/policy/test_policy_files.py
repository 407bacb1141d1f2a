"""The one capped, regular-file-only reader (assay/inputs.py) and the policy file read of wrap
(docs/policy.md, 'File ceilings'): nothing hangs, nothing tracebacks, nothing is read unbounded."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from assay.inputs import DEFAULT_POLICY_BYTES, InputFileError, policy_byte_limit, read_input_file
from assay.policy import PolicyError, load_policy_file, read_policy_file

ASSAY = [sys.executable, "-c", "import sys; from assay.cli.app import main; sys.exit(main())"]


def test_reads_a_regular_file_up_to_the_limit_inclusive(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_bytes(b"x" * 10)
    assert read_input_file(str(path), limit=10, what="policy") == b"x" * 10
    with pytest.raises(InputFileError) as info:
        read_input_file(str(path), limit=9, what="policy")
    assert str(info.value) == f"policy {path}: larger than the 9-byte limit"


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda d: "/dev/zero", "not a regular file (a character device)"),
        (lambda d: str(d), "not a regular file (a directory)"),
        (lambda d: (os.mkfifo(d / "fifo"), str(d / "fifo"))[1], "not a regular file (a FIFO)"),
        (lambda d: str(d / "missing"), "No such file or directory"),
    ],
)
def test_refuses_what_is_not_a_regular_file(tmp_path, make, reason):
    path = make(tmp_path)
    with pytest.raises(InputFileError) as info:
        read_input_file(path, limit=100, what="policy")
    e = info.value
    assert isinstance(e, OSError) and e.strerror == reason and str(e) == f"policy {path}: {reason}"
    assert "\n" not in str(e)


def test_a_symlink_to_a_fifo_is_refused_too(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "fifo", tmp_path / "link")
    with pytest.raises(InputFileError, match=r"a FIFO"):
        read_input_file(str(tmp_path / "link"), limit=100)


def test_policy_limit_comes_from_the_server_variable():
    assert policy_byte_limit({}) == DEFAULT_POLICY_BYTES == 1_000_000
    assert policy_byte_limit({"ASSAY_MCP_MAX_POLICY_BYTES": "12"}) == 12
    assert policy_byte_limit({"ASSAY_MCP_MAX_POLICY_BYTES": "-1"}) == DEFAULT_POLICY_BYTES
    assert policy_byte_limit({"ASSAY_MCP_MAX_POLICY_BYTES": "abc"}) == DEFAULT_POLICY_BYTES


def test_read_policy_file_uses_the_ceiling(tmp_path, monkeypatch):
    path = tmp_path / "p.yaml"
    path.write_bytes(b'version: "2.0"\n')
    monkeypatch.setenv("ASSAY_MCP_MAX_POLICY_BYTES", "15")
    assert read_policy_file(str(path)) == b'version: "2.0"\n'
    monkeypatch.setenv("ASSAY_MCP_MAX_POLICY_BYTES", "14")
    with pytest.raises(InputFileError, match="larger than the 14-byte limit"):
        read_policy_file(str(path))
    with pytest.raises(PolicyError):
        path.write_bytes(b"- a\n")
        load_policy_file(str(path))


@pytest.mark.parametrize("kind", ["zero", "fifo", "dir", "big"])
def test_wrap_policy_read_is_one_line_exit_2(tmp_path, kind):
    """`--policy /dev/zero` was a MemoryError traceback and `--policy FIFO` hung forever."""
    if kind == "zero":
        path, reason = "/dev/zero", "not a regular file (a character device)"
    elif kind == "fifo":
        path, reason = str(tmp_path / "fifo"), "not a regular file (a FIFO)"
        os.mkfifo(path)
    elif kind == "dir":
        path, reason = str(tmp_path), "not a regular file (a directory)"
    else:
        path, reason = str(tmp_path / "big.yaml"), "larger than the 1000000-byte limit"
        with open(path, "wb") as fh:
            fh.write(b"# " + b"x" * 1_000_000 + b"\n")
    marker = tmp_path / "spawned"
    proc = subprocess.run(
        [*ASSAY, "mcp", "wrap", "--policy", path, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "ASSAY_MCP_MAX_POLICY_BYTES"},
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1] == f"fatal: cannot read policy {path}: {reason}"
    assert not marker.exists()


def test_discover_policy_read_refuses_a_fifo(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = subprocess.run(
        [*ASSAY, "mcp", "discover", "--policy", str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"fatal: cannot read policy {fifo}: not a regular file (a FIFO)"
