"""What a first-time user installs: quiet packaging metadata, a demo that needs no test tools,
and one set of install lines shared by README.md and preflight's hint."""

from __future__ import annotations

import re
import subprocess
import tomllib

from assay import __version__
from assay.preflight import install_hint
from tests.conftest import REPO


def test_license_is_an_spdx_string():
    # a TOML table here made setuptools print ~55 lines of deprecation warnings on every install
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert "tomlkit" in " ".join(project["dependencies"])


def test_the_demo_installs_no_test_dependencies():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=!~ \[]", dep)[0] for dep in extras["demo"]}
    assert names == {"mcp"}
    assert not names & {"pytest", "pytest-trio", "hypothesis"}
    dev = (REPO / "dev").read_text()
    demo = dev[dev.index("    demo)") :]
    assert "ensure_venv demo" in demo.split(";;")[0]
    assert "spec='.[demo]'" in dev


def test_dev_without_a_command_prints_usage():
    res = subprocess.run(["bash", str(REPO / "dev")], capture_output=True, timeout=30)
    assert res.returncode == 2 and res.stderr.decode().startswith("usage: ./dev test")


def test_preflight_hint_and_readme_give_the_same_install_lines():
    readme = (REPO / "README.md").read_text()
    hint = install_hint(__version__)
    assert __version__ in hint
    for line in ("pipx install .", "uv tool install .", "pip install ."):
        assert line in hint
        assert f"\n{line}" in readme


def test_the_package_ships_py_typed_and_dev_type_checks_before_the_tests():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert (REPO / "assay" / "py.typed").is_file()
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["assay"]
    assert pyproject["tool"]["mypy"]["packages"] == ["assay"]
    test_deps = {re.split(r"[<>=!~ \[]", dep)[0] for dep in pyproject["project"]["optional-dependencies"]["test"]}
    assert "mypy" in test_deps
    assert "trio-typing" not in test_deps  # its trio-stubs shadow trio's own inline types
    dev = (REPO / "dev").read_text()
    test_cmd = dev[dev.index("    test)") :].split(";;")[0]
    assert test_cmd.index("-m mypy") < test_cmd.index("-m pytest")
