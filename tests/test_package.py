"""`import assay`: the public names load on first use and mean what they always meant."""

from __future__ import annotations

import subprocess
import sys


def probe(code: str) -> str:
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, text=True)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_import_assay_loads_no_command_module():
    assert probe("import sys, assay; print(sorted(m for m in sys.modules if m.startswith('assay')))") == (
        "['assay', 'assay._version']"
    )


def test_public_names_whichever_module_is_imported_first():
    """`assay.preflight` is the function even when the submodule of that name was imported first
    (by a command module, say): importing the submodule does not replace it."""
    for first in ("import assay.preflight", "from assay.preflight import Phase", "import assay"):
        out = probe(
            f"{first}\n"
            "import assay, assay.preflight as mod\n"
            "from assay import preflight, Phase, PreflightReport\n"
            "import importlib; real = importlib.import_module('assay.preflight')\n"
            "print(preflight is real.preflight, assay.preflight is real.preflight, mod is real.preflight,"
            " Phase is real.Phase, PreflightReport is real.PreflightReport, callable(preflight))\n"
        )
        assert out == "True True True True True True", first


def test_unknown_name_is_an_attribute_error():
    assert probe("import assay\ntry:\n    assay.nope\nexcept AttributeError as e:\n    print(e)") == (
        "module 'assay' has no attribute 'nope'"
    )
