"""Timings of assay.inspect.taint (docs/inspect.md, "Value taint"): a full set, find() over a
1 KiB and a 1 MiB argument (prose, JSON with base64, all base64), add_text of 1 MiB.

    PYTHONPATH=. python bench/taint_bench.py
"""

from __future__ import annotations

import base64
import json
import random
import time
import tracemalloc

from assay.inspect.taint import TaintSet


def best(fn, rounds=7):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    rng = random.Random(7)
    words = [("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))) for _ in range(5000)]

    def prose(n: int) -> str:
        out, size = [], 0
        while size < n:
            w = rng.choice(words)
            out.append(w)
            size += len(w) + 1
        return " ".join(out)[:n]

    mib = prose(1 << 20)
    print(f"add_text 1 MiB (empty set): {best(lambda: TaintSet(key=b'b').add_text(mib, 'fs/read')) * 1e3:.1f} ms")
    tracemalloc.start()
    taint = TaintSet(key=b"bench")
    for i in range(64):
        taint.add_text(prose(64 << 10), f"srv/tool{i}")
    taint.add_value("hunter2pw", "db/q")
    taint.add_value("ghp_" + "0123456789abcdefghij" * 2, "gh/get")  # built: no secret in this file
    size, peak = tracemalloc.get_traced_memory()
    print(
        f"full set: {len(taint)} fingerprints, nbytes {taint.nbytes} "
        f"({taint.nbytes / len(taint):.0f}/entry), traced {size} ({size / len(taint):.0f}/entry), "
        f"export {len(taint.export())} bytes"
    )
    tracemalloc.stop()
    texts = [prose(1 << 20) for _ in range(7)]
    print(f"add_text 1 MiB (full set): {best(lambda: taint.add_text(texts.pop(), 'x')) * 1e3:.1f} ms")
    words[:] = [w.upper() for w in words]  # the arguments share no word with the set
    kib = json.dumps({"path": "/home/user/project/src/main.py", "content": prose(900)})[:1024]
    args = {
        "1 KiB JSON": kib,
        "1 MiB prose": prose(1 << 20),
        "1 MiB JSON, base64 half": json.dumps(
            {"a": prose(1 << 19), "b": base64.b64encode(rng.randbytes(3 << 17)).decode()}
        ),
        "1 MiB base64": base64.b64encode(rng.randbytes(3 << 18)).decode(),
        "1 MiB hex": rng.randbytes(1 << 19).hex(),
    }
    for name, text in args.items():
        assert taint.find(text) is None
        rounds = 200 if len(text) < 10000 else 5
        t = best(lambda: taint.find(text), rounds)
        print(
            f"find {name} ({len(text)} chars): {t * 1e6:.0f} us"
            if t < 1e-2
            else f"find {name} ({len(text)} chars): {t * 1e3:.1f} ms"
        )


if __name__ == "__main__":
    main()
