"""A floor for the relay benchmark: a trio relay that only copies bytes both ways.

Same process model as `assay mcp wrap` (assay.proc child, trio FdStreams, 64 KiB reads), but no
framing, admission, policy or records. The gap between this and wrap is assay's own per-frame
work; the gap between this and a direct connection is the cost of any Python/trio hop.
"""

import os
import sys

import trio

from assay import proc


async def main() -> None:
    child = proc.spawn(sys.argv[1:], stdin=proc.PIPE, stdout=proc.PIPE, stderr=proc.INHERIT)
    client_in = trio.lowlevel.FdStream(os.dup(0))
    client_out = trio.lowlevel.FdStream(os.dup(1))

    async def upstream() -> None:
        while data := await client_in.receive_some(65536):
            await child.stdin.send_all(data)
        await child.stdin.aclose()

    async def downstream() -> None:
        while data := await child.stdout.receive_some(65536):
            await client_out.send_all(data)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(upstream)
        nursery.start_soon(downstream)
    await child.wait()


if __name__ == "__main__":
    trio.run(main)
