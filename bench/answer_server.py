"""An MCP stand-in that answers every request with one fixed answer (bench_inspect.py --process):
the line in the file given as its argument, with the request's id put in place of ``"id":0``.

It reads whole chunks and writes one batch of answers per chunk (echo_server.py's loop), so the
server costs little next to what is measured: wrap's own process.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from echo_server import serve  # noqa: E402

ID = re.compile(rb'"id":\s*(-?\d+|"[^"]*")')
with open(sys.argv[1], "rb") as handle:
    HEAD, TAIL = handle.read().rstrip(b"\n").split(b'"id":0', 1)


def answers(lines: list[bytes]) -> list[bytes]:
    out = []
    for line in lines:
        found = ID.search(line)
        if found:
            out.append(HEAD + b'"id":' + found.group(1) + TAIL + b"\n")
    return out


if __name__ == "__main__":
    serve(answers)
