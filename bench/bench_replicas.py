"""`assay mcp serve` as three replicas behind HAProxy on one Postgres (docs/serve.md, "Several
replicas", "Behind HAProxy"): a benchmark, not a test.

    .venv/bin/python bench/bench_replicas.py [--runs 3] [--clients 48] [--users 12] [--seconds 5]
                                             [--kill-rate 150] [--kill-at 3] [--kill-window 3]
                                             [--only tput,kill]

Needs Debian's postgresql and haproxy (which ``./dev test`` installs) and the test extras.

Each run starts its own Postgres database (tests/pgserver.py: initdb into a temporary directory
once, loopback, fsync off as in the tests; a fresh migrated database per run), three `assay mcp
serve` replicas on it (the `assay` next to this Python; each its own state directory, the same
``session_key``, API keys, ``admin_listen`` for the health checks, ``per_user_concurrency`` out of
the way) with one stdio upstream, bench/mcp_fast_server.py (started by each replica for each user
on first use), and one HAProxy (Debian's haproxy; it takes sockets this process listens on, ``bind
fd@N``) with three frontends: ``one`` balances over replica a alone, ``three`` round robin over a,
b and c, ``byuser`` over a, b and c by a hash of the ``Authorization`` header (each user's calls
on one replica; with few users the spread is uneven). Each backend checks each replica's
``/readyz`` on its admin listener (``inter 1s fall 2 rise 2``), with ``retries 3`` and ``option
redispatch 1``, and HAProxy adds an ``X-Replica`` header naming the replica that answered. The policy has an allowlist, a per-user total
(``max_tool_calls_total``) and a flow rule, so every call is judged in a transaction on the
user's row in Postgres. Every request is a 2026-07-28-era ``tools/call`` (stateless: nothing
sticky) of ``fast__search`` over HTTP/1.1 keep-alive, from a small HTTP client of this file (raw
trio sockets, so the load generator costs little of the two cores; its CPU is reported).

Figures:

  throughput  --clients closed-loop clients (each its own connection, one call after another)
              for --seconds through each frontend (interleaved: the order rotates from run to
              run, all on the same processes), twice: the clients spread over --users users
              (user c % users; ``one``, ``three``, ``byuser``), and all of them one user
              (``one``, ``three``). A user's calls are serialized on the user's row; with round
              robin one user's calls also race for it across replicas: a replica whose view of
              the row is stale (another replica wrote it since) judges the call again in a
              transaction holding the lock, one more round trip. ``calls/s`` is tools/call
              answered (a result, not an error) per second; ``ratio`` is over ``one``'s, formed
              within each run; ``spread`` how the calls were shared out (from ``X-Replica``).
  gateway     the replicas' own /metrics (admin listener) before and after each phase, summed:
              per answered call the store attempts and how many were judged again (the
              transactions ended by a commit or abort), and the mean time of a tools/call in
              the gateway, of its decision (the wait for the user's turn in the replica and the
              store included), of its store operations and of the upstream's answer.
  CPU         for each of those phases, each process's CPU time (utime + stime, from
              /proc/<pid>/stat) over the phase, as % of one core and as us per answered call:
              each replica (every thread) and its main thread alone (``trio thread``: the HTTP
              front, identity, policy, relay; the rest is the store's threads, psycopg and
              libpq), the stdio upstreams (the replicas' children), Postgres (the postmaster and
              its children), HAProxy, the load generator (this process); ``replicas`` and
              ``ours`` their sums; ``machine`` everything not idle (/proc/stat, of 200% on two
              cores) and ``others`` what none of ours used (other work on a shared machine).
  limits      what the per-call CPU costs of that run allow on these cores with nothing else
              running: one replica at most one core for its process (its trio thread and the
              store's threads share one GIL) or all the cores for all of ours, whichever is
              less; three replicas at most all the cores for all of ours. Their quotient is the
              best ratio the machine allows. A replica near 100% of a core in the one-replica
              phase is CPU-bound; well under it with the machine idle would mean it waits
              (latency-bound: the store's round trips, the upstream); under it with the machine
              full means the others took the core. Three Python processes on two cores cannot
              give more than 2x one CPU-bound process, less the CPU Postgres, HAProxy, the
              upstreams and the client need per call, which grows with the calls.
  kill        an open-loop load through ``three`` at --kill-rate calls/s over --users users
              (each call sent at its scheduled time on an idle connection of a pool, a new one
              when none is idle); --kill-at seconds in, replica c is SIGKILLed. Each call's
              latency is from its scheduled time to its answer (a call that waited for a
              connection counts the wait). A call answered with ``X-Replica: a`` or ``b`` is
              the survivors' (one HAProxy sent to c after its death found the port closed and
              was redispatched to a or b at once, round robin: it counts, with its retry, as the
              survivors'). A call that failed was on c: sent before the kill, it was in flight
              there (HAProxy answers 502, or closes the client's connection when the request
              went out on a connection to c it kept alive); sent after the kill, HAProxy wrote
              it to c on a kept-alive connection before it saw the connection close. HAProxy is
              not told to retry those (``retry-on empty-response``): the call may have been
              judged and counted on c, and a retry elsewhere would count it twice; the client
              sees the failure (docs/serve.md, "Sessions on any replica"). p50/p99/max of
              the survivors' calls before the kill (from 0.5 s on: the baseline) and in the
              window from the kill to --kill-window seconds after it (the health checks mark c
              down within ~2 s); the failed calls, by kind. Target: the window's p99 < 1 s.

Figures are medians over --runs runs (each run's figure first, then the median; the runs'
values in brackets); the load average is printed at the start and the end, and with each run.
Targets are printed with PASS or MISS: three replicas >= 2.2x the calls/s of one (several
users, round robin), and the survivors' p99 around the kill < 1 s. One run takes about 45 s with
the defaults (start-up ~5 s, 5 x --seconds of throughput, --kill-at + --kill-window + 1 s of
kill); with --runs 3 about 2.5 minutes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "bench"
sys.path.insert(0, str(ROOT))

ASSAY = str(Path(sys.executable).parent / "assay")
UPSTREAM = [sys.executable, str(HERE / "mcp_fast_server.py")]
SESSION_KEY = "a-session-key-for-the-replicas-0123"
TOTAL = 1_000_000_000
POLICY = f"""\
version: "2.0"
tools:
  allow: ["search", "read_file", "send_*"]
enforcement: {{ unconstrained_tools: allow }}
limits: {{ max_tool_calls_total: {TOTAL} }}
sequences:
  - {{ type: never_after, id: no-send-after-secret, trigger: {{ tool: "read_file", args_match: {{ path: "secrets/" }} }}, forbidden: "send_*", for: 1h }}
"""
NAMES = ("a", "b", "c")
LAYOUTS = ("one", "three", "byuser")  # HAProxy's frontends (docstring)
VICTIM = "c"
TARGET_RATIO = 2.2
TARGET_P99 = 1.0
CLK = os.sysconf("SC_CLK_TCK")
GROUPS = ("replica a", "replica b", "replica c", "upstreams", "postgres", "haproxy", "load generator")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if found is None:
        raise SystemExit("bench_replicas: haproxy is not installed (apt-get install haproxy)")
    return found


# --- processes ------------------------------------------------------------------------------


@dataclass
class Replica:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    admin: int
    lines: list[str] = field(default_factory=list)


def start_replica(tmp: Path, name: str, db: str, env: dict[str, str]) -> Replica:
    port, admin = free_port(), free_port()
    config = tmp / f"serve-{name}.yaml"
    config.write_text(
        f"""\
policy: policy.yaml
listen: 127.0.0.1:{port}
state_dir: {tmp / f"state-{name}"}
identity: {{api_keys: keys.txt}}
store: {{url: {json.dumps(db)}, password: {{env: PGPASSWORD_ASSAY}}}}
session_key: {{env: GATEWAY_SESSION_KEY}}
admin_listen: 127.0.0.1:{admin}
limits: {{per_user_concurrency: 1024}}
upstreams:
  fast: {{command: {json.dumps(UPSTREAM)}}}
"""
    )
    proc = subprocess.Popen(
        [ASSAY, "mcp", "serve", "--config", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    replica = Replica(name, proc, port, admin)
    assert proc.stderr is not None
    for raw in proc.stderr:
        line = raw.decode(errors="replace").rstrip()
        replica.lines.append(line)
        if line.startswith("assay: serving"):
            break
    else:
        raise SystemExit(f"bench_replicas: replica {name} did not start:\n" + "\n".join(replica.lines[-20:]))
    stderr = proc.stderr

    def drain() -> None:  # the rest of its output, so a full pipe never stops it
        for raw in stderr:
            replica.lines.append(raw.decode(errors="replace").rstrip())
            del replica.lines[:-50]

    threading.Thread(target=drain, daemon=True).start()
    return replica


def haproxy_config(fds: dict[str, int], replicas: list[Replica]) -> str:
    def servers(names: tuple[str, ...]) -> str:
        return "".join(
            f"    server {r.name} 127.0.0.1:{r.port} check port {r.admin} inter 1s fall 2 rise 2\n"
            for r in replicas
            if r.name in names
        )

    def backend(balance: str) -> str:
        return f"""\
    balance {balance}
    option httpchk GET /readyz
    http-check expect status 200
    http-after-response set-header X-Replica %s
"""

    return f"""\
global
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch 1
frontend one
    bind fd@{fds["one"]}
    default_backend one
frontend three
    bind fd@{fds["three"]}
    default_backend three
frontend byuser
    bind fd@{fds["byuser"]}
    default_backend byuser
backend one
{backend("roundrobin")}{servers(("a",))}backend three
{backend("roundrobin")}{servers(NAMES)}backend byuser
{backend("hdr(Authorization)")}{servers(NAMES)}"""


class HAProxy:
    def __init__(self, tmp: Path, replicas: list[Replica]) -> None:
        binary = haproxy_binary()
        listeners = {}
        for name in LAYOUTS:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.listen(1024)
            listeners[name] = sock
        self.ports = {name: s.getsockname()[1] for name, s in listeners.items()}
        fds = {name: s.fileno() for name, s in listeners.items()}
        cfg = tmp / "haproxy.cfg"
        cfg.write_text(haproxy_config(fds, replicas))
        check = subprocess.run(
            [binary, "-c", "-q", "-f", str(cfg)], capture_output=True, text=True, pass_fds=tuple(fds.values())
        )
        if check.returncode != 0:
            raise SystemExit("bench_replicas: haproxy -c: " + check.stdout + check.stderr)
        self.proc = subprocess.Popen(
            [binary, "-db", "-f", str(cfg)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=tuple(fds.values()),
        )
        for sock in listeners.values():
            sock.close()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- CPU from /proc ---------------------------------------------------------------------------


def cpu_of(pid: int, path: str = "") -> float:
    """utime + stime of a process (all its threads), in seconds; 0 when it is gone."""
    try:
        fields = Path(path or f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK


def children(parents: set[int]) -> dict[int, int]:
    """pid -> parent pid of every process whose parent is in ``parents``."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid in parents:
            out[int(entry)] = ppid
    return out


def machine_busy() -> float:
    """CPU seconds the whole machine spent not idle (all cores), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # less idle and iowait (guest is in user)
    return busy / CLK


class Meter:
    """The processes whose CPU a phase reports, grouped."""

    def __init__(self, replicas: list[Replica], postgres: int, haproxy: int) -> None:
        self.replicas = replicas
        self.postgres = postgres
        self.haproxy = haproxy

    def sample(self) -> dict[str, float]:
        alive = {r.proc.pid: r.name for r in self.replicas}
        kids = children({*alive, self.postgres})
        got = {f"replica {name}": cpu_of(pid) for pid, name in alive.items()}
        for pid, name in alive.items():  # the main thread (trio's); the rest: the store's threads
            got[f"  {name}: trio thread"] = cpu_of(pid, f"/proc/{pid}/task/{pid}/stat")
        got["upstreams"] = sum(cpu_of(pid) for pid, parent in kids.items() if parent in alive)
        got["postgres"] = cpu_of(self.postgres) + sum(
            cpu_of(pid) for pid, parent in kids.items() if parent == self.postgres
        )
        got["haproxy"] = cpu_of(self.haproxy)
        got["load generator"] = cpu_of(os.getpid())
        got["machine"] = machine_busy()
        got["wall"] = time.monotonic()
        return got


SAMPLE = re.compile(
    r"^assay_serve_(store_seconds|decision_seconds|upstream_seconds|request_seconds)(_count|_sum)(\{[^}]*\})? (\S+)$",
    re.M,
)


def scrape(replicas: list[Replica]) -> dict[str, float]:
    """The gateway's own counts and times, summed over the replicas' /metrics: store operations
    by ``op``, decisions, upstream answers, tools/call requests (``_count`` and ``_sum``)."""
    out: dict[str, float] = {}
    for r in replicas:
        with urllib.request.urlopen(f"http://127.0.0.1:{r.admin}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        for found in SAMPLE.finditer(text):
            metric, suffix, labels, value = found.groups()
            label = re.search(r'(?:op|method)="([^"]*)"', labels or "")
            key = f"{metric}{suffix}" + (f" {label.group(1)}" if label else "")
            out[key] = out.get(key, 0.0) + float(value)
    return out


def gateway_shares(before: dict[str, float], after: dict[str, float], calls: float) -> dict[str, float]:
    """Per call answered: the store operations, and the gateway's mean times (ms)."""
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    n = d.get("request_seconds_count tools/call", 0.0) or 1.0
    return {
        "attempts": d.get("store_seconds_count attempt", 0.0) / calls,
        "again": (d.get("store_seconds_count commit", 0.0) + d.get("store_seconds_count abort", 0.0)) / calls,
        "request ms": d.get("request_seconds_sum tools/call", 0.0) / n * 1e3,
        "decision ms": d.get("decision_seconds_sum", 0.0) / max(1.0, d.get("decision_seconds_count", 0.0)) * 1e3,
        "store ms": sum(v for k, v in d.items() if k.startswith("store_seconds_sum")) / n * 1e3,
        "upstream ms": d.get("upstream_seconds_sum", 0.0) / max(1.0, d.get("upstream_seconds_count", 0.0)) * 1e3,
    }


def cpu_shares(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """% of one core each group used between two samples; ``others``: the machine's busy time
    that none of ours used."""
    wall = after["wall"] - before["wall"]
    out = {k: (after[k] - before[k]) / wall * 100 for k in before if k != "wall"}
    out["replicas"] = sum(v for k, v in out.items() if k.startswith("replica "))
    out["ours"] = sum(v for k, v in out.items() if k in GROUPS)
    out["others"] = max(0.0, out["machine"] - out["ours"])
    return out


# --- a small HTTP/1.1 client ------------------------------------------------------------------


class Closed(Exception):
    pass


class Conn:
    """One keep-alive HTTP/1.1 connection: send a whole request, read one answer (Content-Length
    or chunked)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = bytearray()
        self.closed = False

    @classmethod
    async def open(cls, port: int) -> Conn:
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def _more(self) -> None:
        chunk = await self.stream.receive_some(65536)
        if not chunk:
            self.closed = True
            raise Closed("the connection was closed")
        self.buf += chunk

    async def request(self, data: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
        await self.stream.send_all(data)
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            await self._more()
        head = bytes(self.buf[:end]).split(b"\r\n")
        del self.buf[: end + 4]
        status = int(head[0].split(b" ", 2)[1])
        headers = {}
        for line in head[1:]:
            k, _, v = line.partition(b":")
            headers[k.strip().lower()] = v.strip()
        if b"content-length" in headers:
            n = int(headers[b"content-length"])
            while len(self.buf) < n:
                await self._more()
            body = bytes(self.buf[:n])
            del self.buf[:n]
        elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            parts = bytearray()
            while True:
                while (j := self.buf.find(b"\r\n")) < 0:
                    await self._more()
                size = int(bytes(self.buf[:j]).split(b";")[0], 16)
                del self.buf[: j + 2]
                if size == 0:
                    while (j := self.buf.find(b"\r\n")) != 0:  # trailers, then the empty line
                        if j < 0:
                            await self._more()
                        else:
                            del self.buf[: j + 2]
                    del self.buf[:2]
                    break
                while len(self.buf) < size + 2:
                    await self._more()
                parts += self.buf[:size]
                del self.buf[: size + 2]
            body = bytes(parts)
        else:  # until the server closes
            try:
                while True:
                    await self._more()
            except Closed:
                pass
            body = bytes(self.buf)
            self.buf.clear()
        if headers.get(b"connection", b"").lower() == b"close":
            self.closed = True
        return status, headers, body

    async def aclose(self) -> None:
        self.closed = True
        with trio.CancelScope(shield=True):
            await self.stream.aclose()


META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def request(key: str, i: int) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": "fast__search", "arguments": {"query": f"q{i}"}, "_meta": META},
        },
        separators=(",", ":"),
    ).encode()
    return (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer " + key.encode() + b"\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: fast__search\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    ) + body


def answered(status: int, body: bytes) -> bool:
    return status == 200 and b'"result"' in body and b'"isError":true' not in body.replace(b" ", b"")


async def call_once(conn: Conn, key: str, i: int) -> bytes:
    """One call that must be answered; the replica's name."""
    status, headers, body = await conn.request(request(key, i))
    if not answered(status, body):
        raise SystemExit(f"bench_replicas: a call was not answered with a result: HTTP {status} {body[:300]!r}")
    return headers.get(b"x-replica", b"?")


async def warm(port: int, keys: list[str]) -> None:
    """Every user's upstream up on every replica behind ``port`` before any timing (round robin:
    a few calls per user reach each replica)."""
    conn = await Conn.open(port)
    try:
        for k, key in enumerate(keys):
            for j in range(6):
                await call_once(conn, key, k * 10 + j)
    finally:
        await conn.aclose()


async def throughput(port: int, keys: list[str], clients: int, seconds: float) -> tuple[float, dict[str, int]]:
    conns = [await Conn.open(port) for _ in range(clients)]
    done = 0
    spread: dict[str, int] = {}
    end = trio.current_time() + seconds
    start = trio.current_time()

    async def client(c: int) -> None:
        nonlocal done
        conn, key, i = conns[c], keys[c % len(keys)], 0
        while trio.current_time() < end:
            name = (await call_once(conn, key, i)).decode()
            spread[name] = spread.get(name, 0) + 1
            done += 1
            i += 1

    try:
        async with trio.open_nursery() as nursery:
            for c in range(clients):
                nursery.start_soon(client, c)
        took = trio.current_time() - start
    finally:
        for conn in conns:
            await conn.aclose()
    return done / took, spread


@dataclass
class Sent:
    at: float  # scheduled, seconds from the start
    took: float  # scheduled time to the answer (or the failure)
    ok: bool
    replica: str
    why: str = ""  # a failure: the HTTP status or the exception


async def kill_load(
    port: int, keys: list[str], rate: float, kill_at: float, window: float, victim: Replica
) -> tuple[list[Sent], float]:
    """The open-loop load; the calls, and when the victim was killed (seconds from the start)."""
    idle: list[Conn] = []
    sent: list[Sent] = []
    killed = -1.0
    total = int(rate * (kill_at + window + 1.0))

    async def one(i: int, at: float, key: str) -> None:
        conn = idle.pop() if idle else None
        ok, replica, why = False, "", ""
        try:
            with trio.fail_after(30):
                if conn is None:
                    conn = await Conn.open(port)
                status, headers, body = await conn.request(request(key, i))
            ok = answered(status, body)
            replica = headers.get(b"x-replica", b"?").decode()
            why = "" if ok else f"HTTP {status}"
        except (OSError, Closed, trio.BrokenResourceError, trio.TooSlowError, ValueError, IndexError) as exc:
            why = type(exc).__name__
            if conn is not None:
                await conn.aclose()
        sent.append(Sent(at - start, trio.current_time() - at, ok, replica, why))
        if conn is not None and not conn.closed:
            if ok:
                idle.append(conn)
            else:
                await conn.aclose()

    start = trio.current_time() + 0.05
    async with trio.open_nursery() as nursery:
        for i in range(total):
            at = start + i / rate
            await trio.sleep_until(at)
            if killed < 0 and i / rate >= kill_at:
                victim.proc.send_signal(signal.SIGKILL)
                killed = trio.current_time() - start
            nursery.start_soon(one, i, at, keys[i % len(keys)])
    for conn in idle:
        await conn.aclose()
    return sent, killed


# --- one run ----------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def one_run(server: Any, args: argparse.Namespace, k: int) -> dict[str, Any]:
    from tests.pgserver import PASSWORD

    out: dict[str, Any] = {}
    users = [f"user{u}" for u in range(args.users)]
    keys = {who: f"{who}-key-{hashlib.sha256(who.encode()).hexdigest()[:24]}" for who in users}
    with tempfile.TemporaryDirectory(prefix="assay-bench-replicas-") as raw:
        tmp = Path(raw)
        (tmp / "policy.yaml").write_text(POLICY)
        (tmp / "keys.txt").write_text(
            "".join(f"{who} sha256:{hashlib.sha256(key.encode()).hexdigest()}\n" for who, key in keys.items())
        )
        db = server.database()
        env = {**os.environ, "PGPASSWORD_ASSAY": PASSWORD, "GATEWAY_SESSION_KEY": SESSION_KEY}
        replicas: list[Replica] = []
        starters = [
            threading.Thread(target=lambda n=name: replicas.append(start_replica(tmp, n, db, env))) for name in NAMES
        ]
        for t in starters:
            t.start()
        for t in starters:
            t.join()
        replicas.sort(key=lambda r: r.name)
        if len(replicas) != 3:
            raise SystemExit("bench_replicas: a replica did not start")
        proxy = HAProxy(tmp, replicas)
        assert server.process is not None
        meter = Meter(replicas, server.process.pid, proxy.proc.pid)
        all_keys = [keys[u] for u in users]
        try:
            trio.run(warm, proxy.ports["three"], all_keys)
            if "tput" in args.only:
                for mode, mode_keys in (("users", all_keys), ("1 user", all_keys[:1])):
                    layouts = LAYOUTS if mode == "users" else LAYOUTS[:2]
                    for layout in layouts[k % len(layouts) :] + layouts[: k % len(layouts)]:
                        seen = scrape(replicas)
                        before = meter.sample()
                        rate, spread = trio.run(throughput, proxy.ports[layout], mode_keys, args.clients, args.seconds)
                        after = meter.sample()
                        calls = sum(spread.values())
                        out[f"{layout} {mode} gateway"] = gateway_shares(seen, scrape(replicas), calls)
                        out[f"{layout} {mode} calls/s"] = rate
                        out[f"{layout} {mode} cpu"] = cpu_shares(before, after)
                        out[f"{layout} {mode} spread"] = spread
                    for layout in layouts[1:]:
                        out[f"ratio {layout} {mode}"] = out[f"{layout} {mode} calls/s"] / out[f"one {mode} calls/s"]
            if "kill" in args.only:
                victim = next(r for r in replicas if r.name == VICTIM)
                sent, killed = trio.run(
                    kill_load, proxy.ports["three"], all_keys, args.kill_rate, args.kill_at, args.kill_window, victim
                )
                survivors = [s for s in sent if s.ok and s.replica != VICTIM]
                base = [s.took for s in survivors if 0.5 <= s.at < killed]
                window = [s.took for s in survivors if killed <= s.at < killed + args.kill_window]
                failed = [s for s in sent if not s.ok]
                out["kill"] = {
                    "before p50": statistics.median(base),
                    "before p99": pct(base, 0.99),
                    "before max": max(base),
                    "window p50": statistics.median(window),
                    "window p99": pct(window, 0.99),
                    "window max": max(window),
                    "window calls": len(window),
                    "failed": len(failed),
                    "failed how": {
                        how: sum(1 for s in failed if f"{s.why} from {s.replica or '-'}" == how)
                        for how in sorted({f"{s.why} from {s.replica or '-'}" for s in failed})
                    },
                    # sent before the kill: in flight on the victim; after: sent to it (on a
                    # connection HAProxy kept to it) before HAProxy saw it was gone
                    "failed in flight": sum(1 for s in failed if s.at < killed),
                    "failed sent after": sum(1 for s in failed if s.at >= killed),
                    "failed last sent": max((s.at - killed for s in failed), default=0.0),
                    "victim after kill": sum(1 for s in sent if s.ok and s.replica == VICTIM and s.at > killed),
                    "killed at": killed,
                    "calls": len(sent),
                }
        finally:
            proxy.stop()
            for r in replicas:
                if r.proc.poll() is None:
                    r.proc.terminate()
            for r in replicas:
                try:
                    r.proc.wait(30)
                except subprocess.TimeoutExpired:
                    r.proc.kill()
                    r.proc.wait()
    out["load"] = loadavg()
    return out


# --- report -----------------------------------------------------------------------------------


def med(runs: list[dict[str, Any]], key: str, sub: str | None = None) -> tuple[float, list[float]]:
    values = [r[key][sub] if sub else r[key] for r in runs]
    return statistics.median(values), values


def us_per_call(run: dict[str, Any], phase: str, group: str) -> float:
    """CPU microseconds of ``group`` per call answered in ``phase``."""
    return float(run[f"{phase} cpu"][group] / 100 / run[f"{phase} calls/s"] * 1e6)


def show(values: list[float], fmt: str) -> str:
    return "[" + ", ".join(format(v, fmt) for v in values) + "]"


def report(runs: list[dict[str, Any]], args: argparse.Namespace) -> bool:
    ok = True
    targets: list[str] = []
    if "tput" in args.only:
        print()
        print(f"throughput: {args.clients} clients for {args.seconds:g} s each, medians of {len(runs)} runs")
        described = {"one": "1 replica", "three": "3 replicas", "byuser": "3, by user"}
        for mode, label in (("users", f"{args.users} users"), ("1 user", "1 user")):
            one, ones = med(runs, f"one {mode} calls/s")
            print(f"  {label:9} {described['one']:11} {one:5.0f} calls/s {show(ones, '.0f')}")
            for layout in LAYOUTS[1:] if mode == "users" else LAYOUTS[1:2]:
                rate, rates = med(runs, f"{layout} {mode} calls/s")
                ratio, ratios = med(runs, f"ratio {layout} {mode}")
                spread = runs[-1][f"{layout} {mode} spread"]
                print(
                    f"  {'':9} {described[layout]:11} {rate:5.0f} calls/s {show(rates, '.0f')}, "
                    f"ratio {ratio:.2f} {show(ratios, '.2f')}; last run's spread {dict(sorted(spread.items()))}"
                )
                if mode == "users" and layout == "three":
                    good = ratio >= TARGET_RATIO
                    ok = ok and good
                    targets.append(
                        f"  {'PASS' if good else 'MISS'} three replicas (round robin) >= {TARGET_RATIO}x the calls/s "
                        f"of one ({args.users} users): {ratio:.2f}x"
                    )
        print()
        print("CPU, % of one core over each phase (median of the runs), and us of CPU per answered call:")
        phases = [*(f"{layout} users" for layout in LAYOUTS), "one 1 user", "three 1 user"]
        print(f"  {'':16}" + "".join(f"{p:>18}" for p in phases))
        rows = [x for name in NAMES for x in (f"replica {name}", f"  {name}: trio thread")]
        for group in (*rows, *GROUPS[3:], "replicas", "ours", "machine", "others"):
            cells = []
            for p in phases:
                share = statistics.median(r[f"{p} cpu"][group] for r in runs)
                per = statistics.median(us_per_call(r, p, group) for r in runs)
                cells.append(f"{share:6.0f}% {per:6.0f} us")
            print(f"  {group:16}" + "".join(f"{c:>18}" for c in cells))
        print()
        print("the gateway's own figures (its /metrics, summed over the replicas), per answered call:")
        print(f"  {'':16}" + "".join(f"{p:>18}" for p in phases))
        for what, fmt, label in (
            ("attempts", ".2f", "store attempts"),
            ("again", ".2f", "judged again"),
            ("request ms", ".2f", "request, ms"),
            ("decision ms", ".2f", "decision, ms"),
            ("store ms", ".2f", "store, ms"),
            ("upstream ms", ".2f", "upstream, ms"),
        ):
            cells = [format(statistics.median(r[f"{p} gateway"][what] for r in runs), fmt) for p in phases]
            print(f"  {label:16}" + "".join(f"{c:>18}" for c in cells))
        cores = os.cpu_count() or 1
        print()
        print(f"what limits it: the CPU ceilings these per-call costs give on {cores} cores with nothing else running")
        for mode, label in (("users", f"{args.users} users"), ("1 user", "1 user")):
            one_bound = [r[f"one {mode} cpu"]["replica a"] for r in runs]
            # one replica: a core for its process (its threads share one GIL), or the cores for all
            # of our processes, whichever is less
            ones = [
                min(
                    1e6 / us_per_call(r, f"one {mode}", "replica a"),
                    cores * 1e6 / us_per_call(r, f"one {mode}", "ours"),
                )
                for r in runs
            ]
            line = (
                f"  {label:9} replica a alone used {statistics.median(one_bound):.0f}% of a core "
                f"{show(one_bound, '.0f')} (the machine "
                f"{statistics.median(r[f'one {mode} cpu']['machine'] for r in runs):.0f}% of {cores * 100}%); "
                f"ceiling one {statistics.median(ones):.0f} calls/s"
            )
            for layout in LAYOUTS[1:] if mode == "users" else LAYOUTS[1:2]:
                # three: the cores for all of our processes (or a core for each replica)
                threes = [
                    min(
                        len(NAMES) * 1e6 / us_per_call(r, f"{layout} {mode}", "replicas"),
                        cores * 1e6 / us_per_call(r, f"{layout} {mode}", "ours"),
                    )
                    for r in runs
                ]
                line += (
                    f", {described[layout]} {statistics.median(threes):.0f} calls/s (at most "
                    f"{statistics.median(t / o for t, o in zip(threes, ones, strict=True)):.2f}x)"
                )
            print(line)
    if "kill" in args.only:
        print()
        print(
            f"replica kill: {args.kill_rate:g} calls/s open loop over {args.users} users through three replicas, "
            f"replica {VICTIM} SIGKILLed at {args.kill_at:g} s; survivors' calls (ms), medians of {len(runs)} runs"
        )
        for part in ("before", "window"):
            label = "before the kill" if part == "before" else f"kill to +{args.kill_window:g} s"
            cells = []
            for what in ("p50", "p99", "max"):
                m, vs = med(runs, "kill", f"{part} {what}")
                cells.append(f"{what} {m * 1e3:7.1f} {show([v * 1e3 for v in vs], '.1f')}")
            print(f"  {label:18} " + "   ".join(cells))
        failed = [r["kill"]["failed"] for r in runs]
        hows = "; ".join(", ".join(f"{n} {how}" for how, n in r["kill"]["failed how"].items()) or "none" for r in runs)
        print(
            f"  calls failed (all on {VICTIM}): {show(failed, 'd')} of {show([r['kill']['calls'] for r in runs], 'd')}"
        )
        print(f"    how, by run: {hows}")
        after = [r["kill"]["failed sent after"] for r in runs]
        last = max(r["kill"]["failed last sent"] for r in runs)
        print(
            f"    sent before the kill (in flight on {VICTIM}): {show([r['kill']['failed in flight'] for r in runs], 'd')}; "
            f"sent after it (to {VICTIM} on a connection HAProxy kept): {show(after, 'd')}"
            + (f", the last {last * 1e3:.0f} ms after the kill" if any(after) else "")
        )
        print(f"  answered by {VICTIM} after the kill: {show([r['kill']['victim after kill'] for r in runs], 'd')}")
        p99, _ = med(runs, "kill", "window p99")
        good = p99 < TARGET_P99
        ok = ok and good
        targets.append(
            f"  {'PASS' if good else 'MISS'} survivors' p99 from the kill to +{args.kill_window:g} s "
            f"< {TARGET_P99 * 1e3:.0f} ms: {p99 * 1e3:.1f} ms"
        )
    print()
    print("targets:")
    for line in targets:
        print(line)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clients", type=int, default=48, help="concurrent clients of the throughput phases")
    ap.add_argument("--users", type=int, default=12, help="users the clients (and the kill's calls) spread over")
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each throughput phase")
    ap.add_argument("--kill-rate", type=float, default=150.0, help="calls/s of the kill's open-loop load")
    ap.add_argument("--kill-at", type=float, default=3.0, help="seconds into the kill's load when c is killed")
    ap.add_argument("--kill-window", type=float, default=3.0, help="the survivors' window after the kill, s")
    ap.add_argument("--only", default="tput,kill", help="a comma-separated subset of tput,kill")
    args = ap.parse_args()
    args.only = set(args.only.split(","))
    if not args.only <= {"tput", "kill"}:
        print("bench_replicas: --only takes tput and/or kill", file=sys.stderr)
        return 2
    haproxy_binary()
    from tests.pgserver import start_server, stop_server

    print(f"{os.cpu_count()} CPUs, load average {loadavg()} at start", flush=True)
    server = start_server()
    runs: list[dict[str, Any]] = []
    try:
        for k in range(args.runs):
            run = one_run(server, args, k)
            runs.append(run)
            shown = []
            for key, value in run.items():
                if key.endswith("calls/s") or key.startswith("ratio"):
                    shown.append(f"{key} {value:.2f}" if key.startswith("ratio") else f"{key} {value:.0f}")
            if "kill" in run:
                kill = run["kill"]
                shown.append(
                    f"kill: before p99 {kill['before p99'] * 1e3:.1f} ms, window p99 {kill['window p99'] * 1e3:.1f} ms "
                    f"(max {kill['window max'] * 1e3:.1f}), failed {kill['failed']}"
                )
            print(f"  run {k + 1}/{args.runs} (load {run['load']}): " + "; ".join(shown), flush=True)
    finally:
        stop_server(server)
    ok = report(runs, args)
    print(f"load average {loadavg()} at the end")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
