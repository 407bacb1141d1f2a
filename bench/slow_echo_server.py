"""A slow MCP stand-in for the relay benchmark's EOF drain: it reads every request until its
stdin closes, then answers them all, slowly.

    slow_echo_server.py [--mode paced|silent] [--seconds 2.0]

paced (default): the answers go out in 20 bursts spread over --seconds (one burst every
    --seconds/20), so the server is slow in total but never silent for long. This is the case
    wrap must drain: a server that still owes answers and keeps writing is not cut off.
silent: sleeps --seconds, then writes every answer at once. A server silent for longer than
    wrap's --shutdown-grace after the client's EOF is stopped by design (docs/wrap.md,
    "Lifecycle"), so with the default grace of 1 s and --seconds 2 wrap delivers none of them.
"""

import argparse
import re
import sys
import time

ID = re.compile(rb'"id":\s*(-?\d+|"[^"]*")')
BURSTS = 20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("paced", "silent"), default="paced")
    ap.add_argument("--seconds", type=float, default=2.0)
    opts = ap.parse_args()
    data = sys.stdin.buffer.read()
    ids = [m.group(1) for m in map(ID.search, data.split(b"\n")) if m]
    replies = [b'{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}\n' % i for i in ids]
    out = sys.stdout.buffer
    if opts.mode == "silent":
        time.sleep(opts.seconds)
        out.write(b"".join(replies))
        out.flush()
        return
    per = -(-len(replies) // BURSTS) or 1
    for start in range(0, len(replies), per):
        time.sleep(opts.seconds / BURSTS)
        out.write(b"".join(replies[start : start + per]))
        out.flush()


if __name__ == "__main__":
    main()
