"""Secret detector micro-benchmark (docs/inspect.md, "Secrets"). Not a test.

    .venv/bin/python bench/bench_secrets.py [--runs 7] [--baseline 196ef45]

``find_secrets`` on 1 KiB and 1 MiB of prose (without and with the words some rules start from:
secret, Bearer, Authorization, https://), code (the assay/ sources), docs (docs/policy.md
repeated) and base64, against the implementation of another commit (``--baseline``, read with
``git show <commit>:assay/inspect/secrets.py`` into a temporary module) in the same run. Every
call gets a string object of its own (copies made before the clock starts), so no cache kept on
a string (its UTF-8 form) flatters a figure. A figure is the median over ``--runs`` runs of the
mean time per call within a run. Both implementations must give the same spans for every input
(checked before timing). Targets: 1 KiB of prose with no secret <= 4 us; 1 MiB of docs or
base64 <= 10 ms.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assay.inspect.secrets import find_secrets  # noqa: E402

KIB, MIB = 1024, 1024 * 1024
PROSE = (
    "The relay reads each frame from the client, decides whether the call may go on, and passes it "
    "to the server. A policy names the tools that are allowed; everything else is refused with a "
    "clear message. When a server answers, the result goes back the same way, and the log keeps a "
    "short record of what happened, why, and when. None of this is private: it is ordinary text "
    "about well-known behaviour, with commas, full stops and the odd word in capitals (MCP, JSON). "
)
# prose with the words some rules start from (no secret all the same)
AUTH_PROSE = (
    "To call the API, keep the secret key in a vault and send a Bearer token in the Authorization "
    "header; the token expires after an hour. See https://example.com/docs/auth for the details, "
    "and never paste a secret into a chat. A request without the header is refused. "
)


def _fit(text: str, size: int) -> str:
    return (text * (size // len(text) + 1))[:size]


def inputs() -> dict[str, str]:
    code = "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "assay").rglob("*.py")))
    docs = (ROOT / "docs" / "policy.md").read_text(encoding="utf-8")
    b64 = __import__("base64").b64encode(random.Random(0).randbytes(MIB)).decode()
    out = {}
    for name, text in (("prose", PROSE), ("auth prose", AUTH_PROSE), ("code", code), ("docs", docs), ("base64", b64)):
        out[f"{name} 1 KiB"] = _fit(text, KIB)
        out[f"{name} 1 MiB"] = _fit(text, MIB)
    return out


def load_baseline(commit: str) -> Callable[[str], Any] | None:
    try:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commit}:assay/inspect/secrets.py"],
            capture_output=True, check=True, text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"baseline {commit}: not available ({exc}); new figures only", file=sys.stderr)
        return None
    path = Path(tempfile.mkdtemp()) / "secrets_baseline.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("secrets_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks its module up
    spec.loader.exec_module(module)
    return module.find_secrets  # type: ignore[no-any-return]


def per_call(fn: Callable[[str], Any], text: str, calls: int) -> float:
    copies = [text[:-1] + text[-1] for _ in range(calls)]  # a new object each: no cache on it
    start = time.perf_counter()
    for copy in copies:
        fn(copy)
    return (time.perf_counter() - start) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--baseline", default="196ef45", help="a commit whose find_secrets is the baseline")
    opts = ap.parse_args()
    old = load_baseline(opts.baseline)
    texts = inputs()
    find_secrets("warm-up: import and compile " + "x" * 64)
    for name, text in texts.items():
        if old is not None and list(old(text)) != list(find_secrets(text)):
            sys.exit(f"bench_secrets: the two implementations disagree on {name}")
    targets = {"prose 1 KiB": 4e-6, "docs 1 MiB": 10e-3, "base64 1 MiB": 10e-3}
    print(f"{'input':16} {'new':>10} {'baseline':>10} {'speed-up':>9}  target")
    for name, text in texts.items():
        calls = 2000 if len(text) <= KIB else 3
        new_runs, old_runs = [], []
        for _ in range(opts.runs):  # alternate, so drift in machine load hits both alike
            new_runs.append(per_call(find_secrets, text, calls))
            if old is not None:
                old_runs.append(per_call(old, text, calls))
        new = statistics.median(new_runs)
        base = statistics.median(old_runs) if old_runs else float("nan")
        target = targets.get(name)
        verdict = "" if target is None else f"<= {_fmt(target)} {'ok' if new <= target else 'MISS'}"
        print(f"{name:16} {_fmt(new):>10} {_fmt(base):>10} {base / new:>8.1f}x  {verdict}")


def _fmt(seconds: float) -> str:
    if seconds != seconds:
        return "-"
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


if __name__ == "__main__":
    main()
