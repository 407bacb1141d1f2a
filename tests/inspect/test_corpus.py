"""The project's own docs and sources hold nothing any detector finds (docs/inspect.md): wrap
serves them through a real server in the end-to-end tests and must report no finding, so a
page that shows a secret shape or an injection phrase literally would be a false positive
waiting to happen. Examples build such strings from pieces instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.inspect.injection import find_injection, find_poison
from assay.inspect.scan import scan
from assay.inspect.secrets import find_secrets

REPO = Path(__file__).resolve().parent.parent.parent
FILES = sorted(
    [
        *REPO.glob("docs/*.md"),
        REPO / "README.md",
        REPO / "CHANGELOG.md",
        *REPO.glob("assay/**/*.py"),
        *REPO.glob("bench/*.py"),
        *REPO.glob("examples/*"),
    ],
)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_detector_finds_anything_in_the_project(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert find_secrets(text) == []
    assert find_injection(text) == []
    assert find_poison(text) == []


def test_scanning_the_project_as_one_value_finds_nothing() -> None:
    value = {"content": [{"type": "text", "text": p.read_text(encoding="utf-8")} for p in FILES]}
    found = scan(value, secrets_on=True, injection_on=True)
    assert found.findings == [] and found.kinds == frozenset()
    found = scan(value, secrets_on=False, injection_on=True, poison=True)
    assert found.findings == []
