"""`assay mcp serve` under load (docs/serve.md): a benchmark, not a test.

    .venv/bin/python bench/bench_serve.py [--runs 3] [--clients 50] [--users 10] [--seconds 5]
                                          [--compare DIR] [--only tput,latency,idle]

Each run starts a real `assay mcp serve` (the `assay` next to this Python) with OAuth identity
(a JWKS served on 127.0.0.1, RS256 tokens minted here, every request's token checked), a policy
with an allowlist, a schema and a flow rule (no inspection), and one stdio upstream,
bench/mcp_fast_server.py (started by the gateway for each user). Figures:

  throughput  --clients concurrent clients (2025 era: initialize once, then tools/call after
              tools/call with the session id), spread over --users users, for --seconds:
              tools/call answered per second. The clients run in this process (trio, httpx2)
              on the same 2 cores: what they cost is part of the figure, as for a real team on
              one machine.
  latency     one client at 100 calls/s for --paced calls: p50 and p99 through serve, and
              against the same upstream called directly over its pipes (the baseline) in the
              same run; the difference of the p50s is what serve adds (HTTP, JWT, policy,
              session store, the relay to the upstream). Measured with two clients, one after
              the other against the same serve: httpx2 on trio (what a Python agent runs), and
              a lean one (blocking HTTP/1.1 over one socket, LeanClient), which costs what the
              baseline's client costs (blocking writes and reads over the upstream's pipes, no
              event loop): its difference is serve's own, the httpx2 one adds that client's
              cost. Also the serve process's CPU time per call over the httpx2 calls (utime +
              stime from /proc): the figure to trust when other processes share the machine,
              as a wall-clock p50 moves with their load.
  sessions    --idle 2025-era sessions opened (initialize only) and left idle: the serve
              process's RSS (VmRSS) after them, and before.
  instructions  (valgrind) the serve process under callgrind: its instructions per tools/call,
              (count after N2 calls - count after N1) / (N2 - N1), start-up and shutdown
              cancelled out; and the same for bench/hypercorn_floor.py. A figure the machine's
              load cannot move (PYTHONHASHSEED fixed); slow: minutes.
  floor       the same paced clients against bench/hypercorn_floor.py: hypercorn configured as
              serve configures it, answering a fixed result (no identity, policy or upstream).
              What the HTTP stack alone (httpx2 or the lean client, and hypercorn) adds over
              direct on this machine, under this load: what is left of the difference of the
              p50s is assay's.

  sdk         the MCP SDKs' own clients, one after the other, each at 100 calls/s for --paced
              calls: the TypeScript SDK v1's Client (bench/sdk_paced_client.mjs, on Node, what
              most hosts ship) and the Python SDK's Client (2025 era, on asyncio), each calling
              the upstream over stdio (its StdioClientTransport / stdio_client: the baseline) and
              serve over Streamable HTTP: the difference of the p50s is what a host running that
              SDK sees serve add. With floor, each also against bench/hypercorn_floor.py: what
              that client's HTTP transport and hypercorn alone cost over its stdio transport.

  remote      the paced client against bench/http_echo_server.py (the MCP Python SDK's
              Streamable HTTP server, sessions, JSON answers) called directly, then through a
              serve whose one upstream it is (a remote upstream, `url:`): the p50 of each and
              their difference, what serve adds over calling a remote upstream directly (the
              client's HTTP cost is on both sides). Not a target; for reading the one above.

Figures are medians over --runs runs; the load average is printed at the start and the end.
--compare DIR runs every measurement a second time, interleaved run by run, with the assay
package under DIR (PYTHONPATH=DIR), e.g. an export of the previous commit
(``git archive HEAD~1 assay | tar -x -C DIR``): before and after in one sitting, under the same
load. --only runs some of the measurements (tput, latency, idle, floor, instructions, sdk, remote;
the default is the first three).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import trio

HERE = Path(__file__).resolve().parent
ASSAY = str(Path(sys.executable).parent / "assay")
UPSTREAM = [sys.executable, str(HERE / "mcp_fast_server.py")]
POLICY = """\
version: "2.0"
tools:
  allow: ["search", "read_file", "send_*", "echo"]
schemas:
  search:
    type: object
    additionalProperties: false
    required: [query]
    properties:
      query: {type: string, maxLength: 200}
      limit: {type: integer, minimum: 1, maximum: 100}
sequences:
  - { type: never_after, id: no-send-after-secret, trigger: { tool: "read_file", args_match: { path: "secrets/" } }, forbidden: "send_*", for: 1h }
"""
TARGET_TPUT = 500.0
TARGET_ADDED_MS = 2.0
TARGET_IDLE_MB = 100.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Issuer:
    """A JWKS on 127.0.0.1 and RS256 tokens for it."""

    def __init__(self) -> None:
        from joserfc.jwk import RSAKey

        self.key = RSAKey.generate_key(2048, parameters={"kid": "bench"})
        jwks = json.dumps({"keys": [self.key.as_dict(private=False)]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(jwks)))
                self.end_headers()
                self.wfile.write(jwks)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, sub: str, audience: str) -> str:
        from joserfc import jwt

        now = int(time.time())
        claims = {"iss": self.url, "sub": sub, "aud": audience, "iat": now, "exp": now + 3600, "scope": "mcp"}
        return jwt.encode({"alg": "RS256", "kid": "bench"}, claims, self.key)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Serve:
    def __init__(
        self,
        tmp: Path,
        issuer: Issuer,
        package: str | None = None,
        prefix: tuple[str, ...] = (),
        upstream: str = f"fast: {{command: {json.dumps(UPSTREAM)}}}",
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        (tmp / "assay.yaml").write_text(POLICY)
        (tmp / "serve.yaml").write_text(
            f"policy: assay.yaml\nlisten: 127.0.0.1:{self.port}\npublic_url: {self.url}\n"
            f"state_dir: {tmp / 'state'}\n"
            f"identity:\n  oauth: {{issuer: '{issuer.url}', jwks_url: '{issuer.url}/jwks', scopes: [mcp]}}\n"
            f"limits: {{per_user_concurrency: 64}}\n"
            f"upstreams:\n  {upstream}\n"
        )
        env = dict(os.environ)
        if package is not None:
            env["PYTHONPATH"] = os.path.abspath(package)
        self.proc = subprocess.Popen(
            [*prefix, ASSAY, "mcp", "serve", "--config", str(tmp / "serve.yaml")],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            if b"assay: serving" in raw:
                break
        else:
            raise SystemExit("bench_serve: serve did not start")
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self, wait: float = 15) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


async def session(http, url: str, token: str | None) -> dict[str, str]:
    headers = dict(HEADERS) if token is None else {**HEADERS, "Authorization": f"Bearer {token}"}
    r = await http.post(url, headers=headers, json=INITIALIZE)
    r.raise_for_status()
    headers = {**headers, "Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    (await http.post(url, headers=headers, json=note)).raise_for_status()
    return headers


def call(i: int, tool: str = "fast__search") -> dict:
    arguments = {"text": f"q{i}"} if tool.endswith("echo") else {"query": f"q{i}", "limit": 10}
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


async def one_call(http, url: str, headers: dict[str, str], i: int, tool: str = "fast__search") -> None:
    r = await http.post(url, headers=headers, json=call(i, tool))
    if r.status_code != 200:
        raise SystemExit(f"bench_serve: HTTP {r.status_code}: {r.text[:200]}")
    body = r.text
    if '"result"' not in body or '"isError":true' in body.replace(" ", ""):
        raise SystemExit(f"bench_serve: the call was not answered with a result: {body[:300]}")


async def throughput(url: str, tokens: list[str], clients: int, seconds: float) -> float:
    import httpx2

    done = 0
    limits = httpx2.Limits(max_connections=clients + 8, max_keepalive_connections=clients + 8)
    async with httpx2.AsyncClient(limits=limits, timeout=60) as http:
        heads = [await session(http, url, tokens[c % len(tokens)]) for c in range(clients)]
        await one_call(http, url, heads[0], 1)  # the upstream of the first user starts
        for h in heads[: len(tokens)]:
            await one_call(http, url, h, 2)  # every user's upstream is up before timing
        end = trio.current_time() + seconds
        start = trio.current_time()

        async def client(h: dict[str, str]) -> None:
            nonlocal done
            i = 10
            while trio.current_time() < end:
                await one_call(http, url, h, i)
                done += 1
                i += 1

        async with trio.open_nursery() as n:
            for h in heads:
                n.start_soon(client, h)
        return done / (trio.current_time() - start)


async def paced(url: str, token: str | None, n: int, pid: int, tool: str = "fast__search") -> tuple[list[float], float]:
    """The latencies (ms) of ``n`` calls of ``tool`` at 100 calls/s, and the CPU time per call
    (ms) over them of the process ``pid`` (serve, or the server called directly)."""
    import httpx2

    out = []
    async with httpx2.AsyncClient(timeout=60) as http:
        h = await session(http, url, token)
        for i in range(20):
            await one_call(http, url, h, i, tool)
        cpu0 = cpu_seconds(pid)
        for i in range(n):
            t0 = trio.current_time()
            await one_call(http, url, h, 100 + i, tool)
            out.append((trio.current_time() - t0) * 1000)
            await trio.sleep(max(0.0, 0.01 - (trio.current_time() - t0)))
        cpu = (cpu_seconds(pid) - cpu0) / n * 1000
    return out, cpu


class LeanClient:
    """HTTP/1.1 over one blocking socket, for the latency figure's second client: a request is
    one ``sendall``, its answer read to its ``Content-Length``; a ``Connection: close`` answer
    (hypercorn's after 1,000 requests on a connection) makes the next request connect again."""

    def __init__(self, url: str) -> None:
        rest = url.split("://", 1)[1]
        hostport, _, path = rest.partition("/")
        host, _, port = hostport.rpartition(":")
        self.address = (host, int(port))
        self.path = "/" + path
        self.sock: socket.socket | None = None

    def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if self.sock is None:
            self.sock = socket.create_connection(self.address)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.sock.sendall(
            f"POST {self.path} HTTP/1.1\r\nHost: {self.address[0]}:{self.address[1]}\r\n{head}"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += self._recv()
        top, buf = buf.split(b"\r\n\r\n", 1)
        lines = top.decode("latin-1").split("\r\n")
        fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        if "content-length" not in fields:
            raise SystemExit(f"bench_serve: an answer without Content-Length: {lines[0]}")
        length = int(fields["content-length"])
        while len(buf) < length:
            buf += self._recv()
        if fields.get("connection", "").lower() == "close":
            self.close()
        return int(lines[0].split()[1]), fields, buf[:length]

    def _recv(self) -> bytes:
        assert self.sock is not None
        got = self.sock.recv(65536)
        if not got:
            raise SystemExit("bench_serve: the server closed the connection")
        return got

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def lean_paced(url: str, token: str | None, n: int, tool: str = "fast__search") -> list[float]:
    """:func:`paced` with a :class:`LeanClient`: the latencies (ms) of ``n`` calls at 100/s
    (a session first when there is a token, then 20 calls not counted)."""
    client = LeanClient(url)
    headers = dict(HEADERS)
    try:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
            status, fields, _ = client.post(json.dumps(INITIALIZE).encode(), headers)
            headers["Mcp-Session-Id"] = fields["mcp-session-id"]
            headers["MCP-Protocol-Version"] = "2025-06-18"
            client.post(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(), headers)
        out = []
        for i in range(20 + n):
            t0 = time.perf_counter()
            status, _, body = client.post(json.dumps(call(i, tool)).encode(), headers)
            took = time.perf_counter() - t0
            if status != 200 or b'"result"' not in body:
                raise SystemExit(f"bench_serve: HTTP {status}: {body[:300]!r}")
            if i >= 20:
                out.append(took * 1000)
            time.sleep(max(0.0, 0.01 - took))
        return out
    finally:
        client.close()


def direct(n: int) -> list[float]:
    """The upstream over its pipes, one call at a time at 100 calls/s (the baseline)."""
    proc = subprocess.Popen(UPSTREAM, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    out = []
    try:
        for i in range(20 + n):
            t0 = time.perf_counter()
            proc.stdin.write(json.dumps(call(i)).encode() + b"\n")
            proc.stdin.flush()
            proc.stdout.readline()
            took = time.perf_counter() - t0
            if i >= 20:
                out.append(took * 1000)
            time.sleep(max(0.0, 0.01 - took))
    finally:
        proc.stdin.close()
        proc.wait()
    return out


def sdk_ts_paced(n: int, url: str | None = None, token: str | None = None, tool: str = "search") -> list[float]:
    """The latencies (ms) of ``n`` calls at 100/s through the TypeScript SDK v1's client
    (bench/sdk_paced_client.mjs): to the upstream over stdio, or to ``url`` over Streamable HTTP."""
    spec = {"tool": tool, "n": n, **({"url": url, "token": token} if url else {"command": UPSTREAM})}
    got = subprocess.run(
        ["node", str(HERE / "sdk_paced_client.mjs"), json.dumps(spec)], capture_output=True, text=True, check=False
    )
    if got.returncode != 0:
        raise SystemExit(f"bench_serve: the TypeScript SDK client failed: {got.stderr.strip()[-500:]}")
    return json.loads(got.stdout)


def sdk_py_paced(n: int, url: str | None = None, token: str | None = None, tool: str = "search") -> list[float]:
    """The latencies (ms) of ``n`` calls at 100/s through the MCP Python SDK's ``Client`` (2025
    era, on asyncio, what most Python agents run): to the upstream over stdio, or to ``url``
    over Streamable HTTP (the SDK's httpx2 client)."""
    import anyio
    import httpx2
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> list[float]:
        if url is None:
            server = StdioServerParameters(command=UPSTREAM[0], args=UPSTREAM[1:])
        else:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
            server = streamable_http_client(url, http_client=http)
        out = []
        async with Client(server, mode="legacy") as client:
            for i in range(20 + n):
                t0 = time.perf_counter()
                result = await client.call_tool(tool, {"query": f"q{i}", "limit": 10})
                took = time.perf_counter() - t0
                if result.is_error:
                    raise SystemExit(f"bench_serve: the Python SDK's call failed: {result}")
                if i >= 20:
                    out.append(took * 1000)
                await anyio.sleep(max(0.0, 0.01 - took))
        return out

    return anyio.run(main)


class Script:
    """A server script of bench/ running that prints its port last on its first line;
    ``url`` its endpoint."""

    def __init__(self, name: str, prefix: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, str(HERE / name)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert self.proc.stdout is not None
        port = self.proc.stdout.readline().split()[-1].decode()
        self.url = f"http://127.0.0.1:{port}/mcp"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


async def calls_in_a_row(url: str, token: str | None, n: int) -> None:
    """``n`` tools/call one after another (a session first when there is a token)."""
    import httpx2

    async with httpx2.AsyncClient(timeout=600) as http:
        heads = HEADERS if token is None else await session(http, url, token)
        for i in range(n):
            await one_call(http, url, heads, i)


CALLS_N1, CALLS_N2 = 50, 250


def instructions(issuer: Issuer, package: str | None, floor: bool) -> float:
    """Millions of instructions per tools/call of the serve process (or of hypercorn_floor.py),
    under callgrind."""
    counts = []
    for n in (CALLS_N1, CALLS_N2):
        with tempfile.TemporaryDirectory(prefix="assay-bench-serve-") as tmp:
            prefix = ("valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.%p")
            os.environ["PYTHONHASHSEED"] = "0"  # the child's hashing, so its count, fixed
            try:
                if floor:
                    server = Script("hypercorn_floor.py", prefix)
                    try:
                        trio.run(calls_in_a_row, server.url, None, n)
                    finally:
                        server.stop()
                else:
                    serve = Serve(Path(tmp), issuer, package, prefix)
                    try:
                        trio.run(calls_in_a_row, serve.url, issuer.token("user0", serve.url), n)
                    finally:
                        serve.stop(600)
            finally:
                del os.environ["PYTHONHASHSEED"]
            total = 0
            for out in Path(tmp).glob("cg.*"):
                for line in out.read_text().splitlines():
                    if line.startswith(("summary:", "totals:")):
                        total = max(total, int(line.split()[1]))
            counts.append(total)
    return (counts[1] - counts[0]) / (CALLS_N2 - CALLS_N1) / 1e6


async def floor_paced(url: str, n: int) -> list[float]:
    import httpx2

    out = []
    async with httpx2.AsyncClient(timeout=60) as http:
        for i in range(20 + n):
            t0 = trio.current_time()
            await one_call(http, url, HEADERS, i)
            if i >= 20:
                out.append((trio.current_time() - t0) * 1000)
            await trio.sleep(max(0.0, 0.01 - (trio.current_time() - t0)))
    return out


async def idle_sessions(url: str, tokens: list[str], n: int) -> None:
    import httpx2

    async with httpx2.AsyncClient(timeout=60) as http:
        for i in range(n):
            await session(http, url, tokens[i % len(tokens)])


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def one_run(issuer: Issuer, args: argparse.Namespace, package: str | None) -> dict[str, float]:
    nan = float("nan")
    keys = (
        "tput",
        "p50",
        "p99",
        "direct_p50",
        "direct_p99",
        "cpu_ms",
        "floor_p50",
        "lean_p50",
        "lean_floor_p50",
        "rss_before",
        "rss_idle",
        "minstr",
        "floor_minstr",
        "remote_p50",
        "remote_direct_p50",
        "remote_cpu_ms",
        "ts_p50",
        "ts_direct_p50",
        "py_p50",
        "py_direct_p50",
        "ts_floor_p50",
        "py_floor_p50",
    )
    run = dict.fromkeys(keys, nan)
    if "remote" in args.only:
        remote(issuer, args, package, run)
    if "instructions" in args.only:
        run["minstr"] = instructions(issuer, package, floor=False)
        if "floor" in args.only:
            run["floor_minstr"] = instructions(issuer, package, floor=True)
    with tempfile.TemporaryDirectory(prefix="assay-bench-serve-") as tmp:
        serve = Serve(Path(tmp), issuer, package)
        try:
            tokens = [issuer.token(f"user{u}", serve.url) for u in range(args.users)]
            if "tput" in args.only:
                run["tput"] = trio.run(throughput, serve.url, tokens, args.clients, args.seconds)
            if "latency" in args.only:
                lat, run["cpu_ms"] = trio.run(paced, serve.url, tokens[0], args.paced, serve.proc.pid)
                run["lean_p50"] = statistics.median(lean_paced(serve.url, tokens[0], args.paced))
                base = direct(args.paced)
                run.update(p50=statistics.median(lat), p99=pct(lat, 0.99))
                run.update(direct_p50=statistics.median(base), direct_p99=pct(base, 0.99))
            if "floor" in args.only:
                floor = Script("hypercorn_floor.py")
                try:
                    run["floor_p50"] = statistics.median(trio.run(floor_paced, floor.url, args.paced))
                    run["lean_floor_p50"] = statistics.median(lean_paced(floor.url, None, args.paced))
                    if "sdk" in args.only:
                        run["ts_floor_p50"] = statistics.median(sdk_ts_paced(args.paced, floor.url, "-", "search"))
                        run["py_floor_p50"] = statistics.median(sdk_py_paced(args.paced, floor.url, "-", "search"))
                finally:
                    floor.stop()
                if run["direct_p50"] != run["direct_p50"]:
                    run["direct_p50"] = statistics.median(direct(args.paced))
            if "sdk" in args.only:
                run["ts_direct_p50"] = statistics.median(sdk_ts_paced(args.paced))
                run["ts_p50"] = statistics.median(sdk_ts_paced(args.paced, serve.url, tokens[0], "fast__search"))
                run["py_direct_p50"] = statistics.median(sdk_py_paced(args.paced))
                run["py_p50"] = statistics.median(sdk_py_paced(args.paced, serve.url, tokens[0], "fast__search"))
            if "idle" in args.only:
                run["rss_before"] = serve.rss_mb()
                trio.run(idle_sessions, serve.url, tokens, args.idle)
                run["rss_idle"] = serve.rss_mb()
        finally:
            serve.stop()
    return run


def remote(issuer: Issuer, args: argparse.Namespace, package: str | None, run: dict[str, float]) -> None:
    """The remote measurement: the same paced client calls the SDK's Streamable HTTP server
    directly (``echo``), then through a serve whose upstream it is (``web__echo``)."""
    echo = Script("http_echo_server.py")  # the SDK's Streamable HTTP server, JSON answers
    try:
        lat, _ = trio.run(paced, echo.url, None, args.paced, echo.proc.pid, "echo")
        run["remote_direct_p50"] = statistics.median(lat)
        with tempfile.TemporaryDirectory(prefix="assay-bench-serve-") as tmp:
            serve = Serve(Path(tmp), issuer, package, upstream=f"web: {{url: '{echo.url}'}}")
            try:
                token = issuer.token("user0", serve.url)
                lat, run["remote_cpu_ms"] = trio.run(paced, serve.url, token, args.paced, serve.proc.pid, "web__echo")
                run["remote_p50"] = statistics.median(lat)
            finally:
                serve.stop()
    finally:
        echo.stop()


def report(runs: list[dict[str, float]], args: argparse.Namespace, label: str) -> None:
    med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    added = statistics.median(r["p50"] - r["direct_p50"] for r in runs)
    lean = statistics.median(r["lean_p50"] - r["direct_p50"] for r in runs)
    print()
    print(f"{label}:")
    if "tput" in args.only:
        print(f"tools/call per second, {args.clients} clients of {args.users} users: {med['tput']:.0f}")
    if "latency" in args.only:
        print(
            f"p50 through serve {med['p50']:.2f} ms (p99 {med['p99']:.2f}); upstream direct {med['direct_p50']:.2f} ms"
        )
        print(f"p50 through serve with the lean client {med['lean_p50']:.2f} ms")
        print(f"serve CPU per call (paced calls): {med['cpu_ms']:.3f} ms")
    if "floor" in args.only:
        floor = statistics.median(r["floor_p50"] - r["direct_p50"] for r in runs)
        print(
            f"HTTP floor (httpx2 + hypercorn, a fixed answer): p50 {med['floor_p50']:.2f} ms, {floor:+.2f} ms over direct"
        )
        lean_floor = statistics.median(r["lean_floor_p50"] - r["direct_p50"] for r in runs)
        print(f"HTTP floor with the lean client: p50 {med['lean_floor_p50']:.2f} ms, {lean_floor:+.2f} ms over direct")
    if "remote" in args.only:
        over = statistics.median(r["remote_p50"] - r["remote_direct_p50"] for r in runs)
        print(
            f"remote upstream (the SDK's Streamable HTTP server): direct p50 {med['remote_direct_p50']:.2f} ms, "
            f"through serve {med['remote_p50']:.2f} ms ({over:+.2f} ms); serve CPU per call {med['remote_cpu_ms']:.3f} ms"
        )
    if "sdk" in args.only:
        for name, key in (("TypeScript SDK v1", "ts"), ("Python SDK", "py")):
            over = statistics.median(r[f"{key}_p50"] - r[f"{key}_direct_p50"] for r in runs)
            print(
                f"{name} client: upstream over stdio p50 {med[f'{key}_direct_p50']:.2f} ms, through serve "
                f"{med[f'{key}_p50']:.2f} ms ({over:+.2f} ms)"
            )
            if "floor" in args.only:
                floor = statistics.median(r[f"{key}_floor_p50"] - r[f"{key}_direct_p50"] for r in runs)
                print(f"  HTTP floor with it: p50 {med[f'{key}_floor_p50']:.2f} ms, {floor:+.2f} ms over stdio")
    if "instructions" in args.only:
        print(f"serve: {med['minstr']:.3f} M instructions per tools/call (callgrind)")
        if "floor" in args.only:
            print(f"HTTP floor: {med['floor_minstr']:.3f} M instructions per call (callgrind)")
    if "idle" in args.only:
        print(f"serve RSS: {med['rss_before']:.1f} MB, after {args.idle} idle sessions {med['rss_idle']:.1f} MB")
    sdk = {key: statistics.median(r[f"{key}_p50"] - r[f"{key}_direct_p50"] for r in runs) for key in ("ts", "py")}
    if args.only & {"tput", "latency", "idle", "sdk"}:
        print("targets:")
    for phase, name, ok, shown in (
        ("tput", f">= {TARGET_TPUT:.0f} tools/call/s", med["tput"] >= TARGET_TPUT, f"{med['tput']:.0f}"),
        (
            "latency",
            f"<= +{TARGET_ADDED_MS:g} ms p50 over direct, httpx2 client",
            added <= TARGET_ADDED_MS,
            f"{added:+.2f} ms",
        ),
        (
            "latency",
            f"<= +{TARGET_ADDED_MS:g} ms p50 over direct, lean client",
            lean <= TARGET_ADDED_MS,
            f"{lean:+.2f} ms",
        ),
        (
            "sdk",
            f"<= +{TARGET_ADDED_MS:g} ms p50 over the same client over stdio, TypeScript SDK v1",
            sdk["ts"] <= TARGET_ADDED_MS,
            f"{sdk['ts']:+.2f} ms",
        ),
        (
            "sdk",
            f"<= +{TARGET_ADDED_MS:g} ms p50 over the same client over stdio, Python SDK",
            sdk["py"] <= TARGET_ADDED_MS,
            f"{sdk['py']:+.2f} ms",
        ),
        (
            "idle",
            f"{args.idle} idle sessions <= {TARGET_IDLE_MB:g} MB RSS",
            med["rss_idle"] <= TARGET_IDLE_MB,
            f"{med['rss_idle']:.1f} MB",
        ),
    ):
        if phase in args.only:
            print(f"  {'ok  ' if ok else 'MISS'} {name}: {shown}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--users", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--paced", type=int, default=500)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--compare", metavar="DIR", help="also run serve with the assay package under DIR")
    ap.add_argument(
        "--only",
        default="tput,latency,idle",
        help="a comma-separated subset of tput,latency,idle,floor,instructions,sdk,remote",
    )
    args = ap.parse_args()
    args.only = set(args.only.split(","))
    if "instructions" in args.only and shutil.which("valgrind") is None:
        print("bench_serve: instructions needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    if args.compare and not (Path(args.compare) / "assay").is_dir():
        print(f"bench_serve: no assay package under {args.compare}", file=sys.stderr)
        return 2
    print(f"{os.cpu_count()} CPUs, load average {loadavg()} at start", flush=True)
    issuer = Issuer()
    sides: dict[str, tuple[str | None, list[dict[str, float]]]] = {"this checkout": (None, [])}
    if args.compare:
        sides[f"compare ({args.compare})"] = (args.compare, [])
    for k in range(args.runs):
        for label, (package, runs) in sides.items():
            run = one_run(issuer, args, package)
            runs.append(run)
            shown = ", ".join(f"{key} {v:.2f}" for key, v in run.items() if v == v)
            print(f"  run {k + 1}/{args.runs} [{label}]: {shown}", flush=True)
    for label, (_, runs) in sides.items():
        report(runs, args, label)
    print(f"load average {loadavg()} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
