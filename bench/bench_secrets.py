"""Secret detector micro-benchmark (docs/inspect.md, "Secrets"). Not a test.

    .venv/bin/python bench/bench_secrets.py [--runs 7] [--baseline 5900dbe]

``find_secrets`` on 1 KiB and 1 MiB of prose (without and with the words some rules start from:
secret, Bearer, Authorization, https://), code (the assay/ sources), docs (docs/policy.md
repeated) and base64, against the implementation of another commit (``--baseline``: its
``assay`` package, exported with ``git archive``, measured in a child process with the same
inputs, in the same run). Every call gets a string object of its own (copies made before the
clock starts), so no cache kept on a string (its UTF-8 form) flatters a figure. A figure is the
median over ``--runs`` runs of the mean time per call within a run. The two implementations need
not find the same (the rules change): the counts of what each found are printed. Targets: 1 KiB
of prose with no secret <= 4 us; 1 MiB of docs or base64 <= 10 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if "--measure" not in sys.argv:
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


def inputs(root: Path) -> dict[str, str]:
    code = "".join(p.read_text(encoding="utf-8") for p in sorted((root / "assay").rglob("*.py")))
    docs = (root / "docs" / "policy.md").read_text(encoding="utf-8")
    b64 = __import__("base64").b64encode(random.Random(0).randbytes(MIB)).decode()
    out = {}
    for name, text in (("prose", PROSE), ("auth prose", AUTH_PROSE), ("code", code), ("docs", docs), ("base64", b64)):
        out[f"{name} 1 KiB"] = _fit(text, KIB)
        out[f"{name} 1 MiB"] = _fit(text, MIB)
    return out


def per_call(fn: Callable[[str], Any], text: str, calls: int) -> float:
    copies = [text[:-1] + text[-1] for _ in range(calls)]  # a new object each: no cache on it
    start = time.perf_counter()
    for copy in copies:
        fn(copy)
    return (time.perf_counter() - start) / calls


def measure(root: Path, runs: int) -> dict[str, Any]:
    """Seconds per call (one figure per run) and the findings, for each input."""
    texts = inputs(root)
    find_secrets("warm-up: import and compile " + "x" * 64)
    out: dict[str, Any] = {}
    for name, text in texts.items():
        calls = 2000 if len(text) <= KIB else 3
        out[name] = {
            "runs": [per_call(find_secrets, text, calls) for _ in range(runs)],
            "found": len(find_secrets(text)),
        }
    return out


def baseline(commit: str, runs: int) -> dict[str, Any] | None:
    """``measure`` of ``commit``'s implementation, in a child process on an export of its
    ``assay`` package (the inputs are this checkout's)."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", commit, "assay"], capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"baseline {commit}: not available ({exc}); new figures only", file=sys.stderr)
        return None
    tree = Path(tempfile.mkdtemp())
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    code = (
        f"import sys; sys.path.insert(0, {str(tree)!r}); sys.argv = ['x', '--measure']; "
        f"sys.path.insert(1, {str(ROOT / 'bench')!r}); import bench_secrets, json; "
        f"print(json.dumps(bench_secrets.measure(__import__('pathlib').Path({str(ROOT)!r}), {runs})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        print(f"baseline {commit}: failed:\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--baseline", default="5900dbe", help="a commit whose find_secrets is the baseline")
    opts = ap.parse_args()
    old = baseline(opts.baseline, opts.runs)
    new = measure(ROOT, opts.runs)
    targets = {"prose 1 KiB": 4e-6, "docs 1 MiB": 10e-3, "base64 1 MiB": 10e-3}
    print(f"{'input':16} {'new':>10} {'baseline':>10} {'speed-up':>9}  found new/baseline  target")
    for name, figures in new.items():
        value = statistics.median(figures["runs"])
        base = statistics.median(old[name]["runs"]) if old else float("nan")
        found = f"{figures['found']}/{old[name]['found'] if old else '-'}"
        target = targets.get(name)
        verdict = "" if target is None else f"<= {_fmt(target)} {'ok' if value <= target else 'MISS'}"
        print(f"{name:16} {_fmt(value):>10} {_fmt(base):>10} {base / value:>8.1f}x  {found:>18}  {verdict}")


def _fmt(seconds: float) -> str:
    if seconds != seconds:
        return "-"
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


if __name__ == "__main__":
    main()
