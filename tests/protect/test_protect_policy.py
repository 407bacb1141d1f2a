"""protect checks the policy with the loader wrap starts with (docs/protect.md): what protect
accepts, `assay mcp wrap` loads, and what wrap refuses, protect refuses before writing."""

from __future__ import annotations

import os

from assay.clients import protect as p
from assay.policy import load_policy_file

GOOD = b'version: "2.0"\ntools:\n  allow: ["echo"]\n'


def test_a_policy_that_loads(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_bytes(GOOD)
    assert p.check_policy(str(path)) is None
    load_policy_file(str(path))  # and wrap's loader takes it too


def test_a_policy_over_the_ceiling_is_refused_as_wrap_refuses_it(tmp_path, monkeypatch):
    path = tmp_path / "policy.yaml"
    path.write_bytes(GOOD)
    monkeypatch.setenv("ASSAY_MCP_MAX_POLICY_BYTES", str(len(GOOD) - 1))
    problem = p.check_policy(str(path))
    assert problem is not None and problem.startswith(f"cannot read policy {path}: ")
    monkeypatch.setenv("ASSAY_MCP_MAX_POLICY_BYTES", str(len(GOOD)))
    assert p.check_policy(str(path)) is None


def test_a_fifo_is_refused_without_waiting(tmp_path):
    path = tmp_path / "policy.yaml"
    os.mkfifo(path)
    problem = p.check_policy(str(path))
    assert problem is not None and "not a regular file" in problem


def test_an_invalid_policy_gives_the_loaders_line(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_bytes(b'version: "2.0"\ntools: [1\n')
    problem = p.check_policy(str(path))
    assert problem is not None and "\n" not in problem


def test_warnings_go_to_the_callback(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_bytes(
        b'version: "2.0"\ntools:\n  allow: ["echo"]\nschemas:\n  echo:\n    type: object\n'
        b'    properties:\n      q: {type: string, pattern: "(?=a)b"}\n'
    )
    lines: list[str] = []
    assert p.check_policy(str(path), warn=lines.append) is None
    assert lines  # the slow-pattern warning of the loader
