"""`assay mcp protect --policy` goes through the one policy file entry wrap starts with,
assay.policy.load_policy_file (docs/protect.md, "Output and exit codes"): a policy wrap would
refuse is refused before the config changes, with one line, and never hangs."""

from __future__ import annotations

import os

import pytest

from tests.discover._discover_helpers import make_env, run_assay
from tests.protect._configs import CLAUDE_DESKTOP


@pytest.fixture
def setup(tmp_path):
    home = tmp_path / "home"
    config = home / ".config" / "Claude" / "claude_desktop_config.json"
    config.parent.mkdir(parents=True)
    config.write_text(CLAUDE_DESKTOP)
    return home, config


def _refused(res, config, reason):
    err = res.stderr.decode()
    assert res.returncode == 1, err
    assert err.startswith("fatal: the policy does not load, nothing was changed: cannot read policy ")
    assert err.endswith(f"{reason}\n") and err.count("\n") == 1 and "Traceback" not in err
    assert config.read_text() == CLAUDE_DESKTOP and os.listdir(config.parent) == [config.name]


def test_a_policy_over_wraps_ceiling_is_refused_and_the_config_unchanged(setup, tmp_path):
    home, config = setup
    big = tmp_path / "big.yaml"
    big.write_text('version: "2.0"\nname: big\n' + "#" * 1_200_000 + "\n")
    res = run_assay("mcp", "protect", "claude", "--policy", str(big), env=make_env(home), cwd=tmp_path)
    _refused(res, config, "larger than the 1000000-byte limit")


def test_a_fifo_policy_is_refused_at_once(setup, tmp_path):
    home, config = setup
    fifo = tmp_path / "policy.yaml"
    os.mkfifo(fifo)
    # nobody writes the FIFO: a reader that opened it blocking would wait for ever (timeout fails)
    res = run_assay(
        "mcp", "protect", "claude", "--policy", str(fifo), "--init-policy", env=make_env(home), cwd=tmp_path, timeout=30
    )
    _refused(res, config, "not a regular file (a FIFO)")


def test_dev_zero_is_refused_without_a_traceback(setup, tmp_path):
    home, config = setup
    res = run_assay("mcp", "protect", "claude", "--policy", "/dev/zero", env=make_env(home), cwd=tmp_path, timeout=30)
    _refused(res, config, "not a regular file (a character device)")
