"""The connection limits on a real socket (docs/serve.md, "Connections"): a client that opens
connections and sends nothing is held to ``limits.max_connections_per_address``, the gateway to
``limits.max_connections``; a connection over either gets a 503 it can read and is closed, over
TLS it is closed before the handshake; the connections taken are served, and one that ends makes
room. Sources 127.0.0.2 and 127.0.0.3 are loopback addresses of their own."""

from __future__ import annotations

import datetime
import json
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
import trio

from tests.serve.frontfakes import FakeGateway, running
from tests.serve.test_front_hostile_wire import INIT, Wire, sized


async def connect_from(bound: Any, source: str) -> Wire:
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    await sock.bind((source, 0))
    await sock.connect((bound.host, bound.port))
    return Wire(trio.SocketStream(sock))


async def refused(wire: Wire) -> dict[str, Any]:
    """The connection's 503 over a limit, read before the server closes it: its error."""
    status, headers, body = await wire.answer()
    assert (status, headers["retry-after"], headers["connection"]) == (503, "1", "close")
    assert await wire.closed()
    error: dict[str, Any] = json.loads(body)["error"]
    return error


async def served(wire: Wire) -> int:
    await wire.stream.send_all(sized(INIT))
    status, _, _ = await wire.answer()
    return status


async def test_one_address_is_held_to_its_cap_and_others_are_served() -> None:
    reports: list[str] = []
    limits = {"max_connections": 10, "max_connections_per_address": 2}
    async with running(FakeGateway(), front={"report": reports.append}, **limits) as (bound, _stop):
        idle = [await connect_from(bound, "127.0.0.1") for _ in range(2)]  # open, nothing sent
        over = await connect_from(bound, "127.0.0.1")
        error = await refused(over)
        assert "limits.max_connections_per_address: 2" in error["message"]
        assert len(reports) == 1 and "127.0.0.1" in reports[0]
        assert await served(await connect_from(bound, "127.0.0.2")) == 200
        assert await served(idle[0]) == 200  # the connections taken are served
        # the refused connection's request, sent anyway, changes nothing; another is refused too
        again = await connect_from(bound, "127.0.0.1")
        await again.stream.send_all(sized(INIT))
        await refused(again)
        assert len(reports) == 1  # reported once a minute, not per connection
        # one ends: a new connection from that address gets in (once the server has seen it end)
        await idle[1].stream.aclose()
        with trio.fail_after(10):
            while True:
                wire = await connect_from(bound, "127.0.0.1")
                await wire.stream.send_all(sized(INIT))
                status, _, _ = await wire.answer()
                if status == 200:
                    break
                assert status == 503
                await trio.sleep(0.01)  # a poll for the end to be seen, bounded by fail_after


async def test_the_total_cap_holds_across_addresses() -> None:
    async with running(FakeGateway(), max_connections=3, max_connections_per_address=2) as (bound, _stop):
        held = [await connect_from(bound, source) for source in ("127.0.0.1", "127.0.0.1", "127.0.0.2")]
        error = await refused(await connect_from(bound, "127.0.0.3"))
        assert "limits.max_connections: 3" in error["message"]
        assert [await served(wire) for wire in held] == [200, 200, 200]


def self_signed(where: Path) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = where / "cert.pem", where / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(cert_path), str(key_path)


async def test_over_tls_a_connection_over_the_cap_is_closed_before_the_handshake(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    client_tls = ssl.create_default_context()
    client_tls.check_hostname = False
    client_tls.verify_mode = ssl.CERT_NONE
    front = {"tls_cert": cert, "tls_key": key}
    async with running(FakeGateway(), front=front, max_connections_per_address=1) as (bound, _stop):
        first = trio.SSLStream(await trio.open_tcp_stream(bound.host, bound.port), client_tls)
        await first.do_handshake()  # taken: its handshake completes
        second = trio.SSLStream(await trio.open_tcp_stream(bound.host, bound.port), client_tls)
        with pytest.raises(trio.BrokenResourceError):
            with trio.fail_after(10):
                await second.do_handshake()
        await first.send_all(sized(INIT))
        got = b""
        while b"\r\n\r\n" not in got:
            got += await first.receive_some()
        assert got.startswith(b"HTTP/1.1 200")


async def test_a_connection_the_client_closed_is_closed_at_once_not_after_the_keep_alive() -> None:
    """hypercorn held a closed idle connection's socket for its 30 s keep-alive; now it goes
    when the client's side ends, idle or after an answer, so client-closed connections do not
    pile up under the caps."""
    import os

    def files() -> int:
        return len(os.listdir("/proc/self/fd"))

    async with running(FakeGateway(), max_connections_per_address=3) as (bound, _stop):
        before = files()
        for _ in range(10):
            idle = await trio.open_tcp_stream(bound.host, bound.port)
            await idle.aclose()
            used = await connect_from(bound, "127.0.0.1")
            assert await served(used) == 200
            await used.stream.aclose()
        with trio.fail_after(10):  # the keep-alive is 30 s
            while files() > before:
                await trio.sleep(0.01)  # a poll for the server's closes, bounded by fail_after
            while True:  # and their places under the cap, freed as each connection's task ends
                held = [await connect_from(bound, "127.0.0.1") for _ in range(3)]
                if [await served(wire) for wire in held] == [200, 200, 200]:
                    break
                for wire in held:
                    await wire.stream.aclose()
                await trio.sleep(0.01)


async def test_a_real_serve_raises_its_open_files_says_when_it_cannot_and_reports_a_refusal(tmp_path: Path) -> None:
    import signal
    import sys

    from tests.serve.gwsupport import local_serve_config

    config = local_serve_config(tmp_path, "limits: {max_connections: 600, max_connections_per_address: 1}")
    assay = str(Path(sys.executable).parent / "assay")
    proc = subprocess.Popen(  # 1100 open files now, at most 1500
        ["bash", "-c", 'ulimit -Sn 1100 && ulimit -Hn 1500 && exec "$0" "$@"']
        + [assay, "mcp", "serve", "--config", str(config)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    assert proc.stderr is not None
    try:
        with trio.fail_after(60):
            lines = []
            while not lines or not lines[-1].startswith(b"assay: serving"):
                lines.append(await trio.to_thread.run_sync(proc.stderr.readline))
                assert lines[-1], lines
            warned = [line for line in lines if b"max_connections" in line]
            assert warned == [
                b"assay: limits.max_connections is 600 but this process may open only 1500 files "
                b"(ulimit -n; 1024 are kept for the rest): lower it, or raise the limit\n"
            ]
            soft, hard = (
                int(f) for f in Path(f"/proc/{proc.pid}/limits").read_text().split("open files")[1].split()[:2]
            )
            assert (soft, hard) == (1500, 1500)  # raised as far as the hard limit allows
            port = int(lines[-1].split()[2].rsplit(b":", 1)[1].split(b"/")[0])
            bound = type("Bound", (), {"host": "127.0.0.1", "port": port})()
            first = await connect_from(bound, "127.0.0.1")
            error = await refused(await connect_from(bound, "127.0.0.1"))
            assert "limits.max_connections_per_address: 1" in error["message"]
            report = await trio.to_thread.run_sync(proc.stderr.readline)
            assert report.startswith(b"assay: refusing connections over limits.max_connections_per_address (1); ")
            assert await served(first) == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=30)[1]
        assert b"Traceback" not in rest, rest


async def test_a_flood_of_connections_from_one_address_wedges_no_one_else() -> None:
    """500 connections at once from one address against caps of 40 per address and 100 in all:
    40 are taken, every other one is answered 503 or (past the refusals lingering at once)
    closed at once, never left open; another address is served meanwhile; when the flood ends,
    its places and files are freed."""
    import os

    def files() -> int:
        return len(os.listdir("/proc/self/fd"))

    async with running(FakeGateway(), max_connections=100, max_connections_per_address=40) as (bound, _stop):
        before = files()
        flood = [await trio.open_tcp_stream(bound.host, bound.port) for _ in range(500)]
        ended: list[bytes] = []
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:

                async def until_closed(stream: trio.SocketStream) -> None:
                    got = b""
                    while True:
                        try:
                            data = await stream.receive_some()
                        except trio.BrokenResourceError:  # closed at once: a reset
                            data = b""
                        if not data:
                            ended.append(got)
                            return
                        got += data

                for stream in flood:
                    nursery.start_soon(until_closed, stream)
                # meanwhile another address is served
                assert await served(await connect_from(bound, "127.0.0.2")) == 200
                with trio.move_on_after(15):  # the 460 refused end; the 40 taken stay open
                    while len(ended) < 460:
                        await trio.sleep(0.01)  # a poll of the count, bounded
                nursery.cancel_scope.cancel()
        assert len(ended) == 460, len(ended)
        assert all(got == b"" or got.startswith(b"HTTP/1.1 503") for got in ended)
        assert any(got.startswith(b"HTTP/1.1 503") for got in ended)
        for stream in flood:
            await stream.aclose()
        with trio.fail_after(10):
            while files() > before + 1:  # the connection from 127.0.0.2 may still be open
                await trio.sleep(0.01)  # a poll for the server's closes, bounded by fail_after
            while True:  # and the flood's places are free again
                held = [await connect_from(bound, "127.0.0.1") for _ in range(40)]
                if all([await served(wire) == 200 for wire in held]):
                    break
                for wire in held:
                    await wire.stream.aclose()
                await trio.sleep(0.01)


async def test_the_admin_listener_holds_few_connections_and_still_answers_another_address() -> None:
    from assay.shells.serve.admin import ADMIN_MAX_CONNECTIONS_PER_ADDRESS, Admin, serve_admin

    async def ready() -> None:
        return None

    async with trio.open_nursery() as nursery:
        bound = await nursery.start(
            lambda task_status: serve_admin(listen="127.0.0.1:0", app=Admin(ready=ready), task_status=task_status)
        )
        idle = [await connect_from(bound, "127.0.0.1") for _ in range(ADMIN_MAX_CONNECTIONS_PER_ADDRESS + 1)]
        answers: list[bytes] = []
        with trio.fail_after(10):
            async with trio.open_nursery() as readers:

                async def read(wire: Wire) -> None:
                    answers.append(await wire.stream.receive_some())
                    readers.cancel_scope.cancel()

                for wire in idle:
                    readers.start_soon(read, wire)
        assert len(answers) == 1 and answers[0].startswith(b"HTTP/1.1 503"), answers
        other = await connect_from(bound, "127.0.0.2")
        await other.stream.send_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        status, _, body = await other.answer()
        assert (status, body) == (200, b"ok\n")
        nursery.cancel_scope.cancel()


MODERN_BLOCK = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "block",
            "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
).encode()
MODERN_HEADERS = (b"mcp-protocol-version: 2026-07-28", b"mcp-method: tools/call", b"mcp-name: block")


async def test_the_keep_alive_closes_an_idle_connection_never_a_busy_one() -> None:
    """``limits.keep_alive`` (0.3 s here): a connection that sends nothing, or nothing more after
    an answer, is closed once that long has passed (not before); a request in flight for several
    times that long keeps its connection, and after its answer the timer runs again."""
    gateway = FakeGateway()
    keep_alive = 0.3
    async with running(gateway, keep_alive_s=keep_alive) as (bound, _stop):
        with trio.fail_after(10):
            start = trio.current_time()
            idle = await connect_from(bound, "127.0.0.1")
            assert await idle.closed()
            assert trio.current_time() - start >= keep_alive - 0.05

            used = await connect_from(bound, "127.0.0.1")
            assert await served(used) == 200
            answered = trio.current_time()
            assert await used.closed()
            assert trio.current_time() - answered >= keep_alive - 0.05

            busy = await connect_from(bound, "127.0.0.1")
            await busy.stream.send_all(sized(MODERN_BLOCK, *MODERN_HEADERS))
            await gateway.until(lambda: gateway.blocked == 1)
            # a bounded wait past the keep-alive: only a fault can close the connection meanwhile
            await trio.sleep(keep_alive * 4)
            gateway.release.set()
            status, _, body = await busy.answer()
            assert status == 200 and json.loads(body)["id"] == 7
            assert await served(busy) == 200  # still open for the next request
            assert await busy.closed()  # and closed a keep-alive after that one


async def test_stopping_closes_the_idle_connections_and_answers_the_busy_one() -> None:
    gateway = FakeGateway()
    async with running(gateway) as (bound, stop):  # keep_alive 30 s: the stop does it
        with trio.fail_after(10):
            idle = await connect_from(bound, "127.0.0.1")
            assert await served(idle) == 200
            busy = await connect_from(bound, "127.0.0.1")
            await busy.stream.send_all(sized(MODERN_BLOCK, *MODERN_HEADERS))
            await gateway.until(lambda: gateway.blocked == 1)
            stop.set()
            assert await idle.closed()
            gateway.release.set()
            status, _, body = await busy.answer()
            assert status == 200 and json.loads(body)["id"] == 7


async def test_a_fault_in_the_http_server_ends_its_connection_not_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """In hypercorn's trio worker an exception out of one connection's task ended the whole
    server (as HTTP/2 data for an answered stream once did: test_front_h2_answered.py). Here a
    fault is injected in the HTTP/1.1 protocol for the bytes ``BOOM``: that connection is closed,
    one line says so, and the other connections and the server go on."""
    from hypercorn.protocol import h11 as protocol

    handle = protocol.H11Protocol.handle

    async def faulty(self: Any, event: Any) -> None:
        if b"BOOM" in getattr(event, "data", b""):
            raise KeyError("injected")
        await handle(self, event)

    monkeypatch.setattr(protocol.H11Protocol, "handle", faulty)
    reports: list[str] = []
    async with running(FakeGateway(), front={"report": reports.append}) as (bound, _stop):
        with trio.fail_after(10):
            other = await connect_from(bound, "127.0.0.1")
            for _ in range(2):
                hit = await connect_from(bound, "127.0.0.1")
                await hit.stream.send_all(b"BOOM")
                assert await hit.closed()
            assert reports == ["assay: a connection ended by a fault in the HTTP server (KeyError); the rest go on"]
            assert await served(other) == 200
            assert await served(await connect_from(bound, "127.0.0.2")) == 200


@given(limit=st.sampled_from(["max_connections", "max_connections_per_address"]), value=st.integers(1, 10**9))
def test_the_refusal_is_read_by_h11_as_written(limit: str, value: int) -> None:
    """The 503 bytes, read by h11 (the parser under httpx2 and hypercorn): one whole response,
    its status, headers and JSON-RPC body as meant, and the connection's end."""
    import h11

    from assay.gateway.connections import Refused
    from assay.shells.serve.conncap import refusal_bytes

    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="POST", target="/mcp", headers=[("host", "x"), ("content-length", "0")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(refusal_bytes(Refused(limit, value, False)))
    response = conn.next_event()
    assert isinstance(response, h11.Response) and response.status_code == 503
    headers = {k.decode(): v.decode() for k, v in response.headers}
    assert (headers["retry-after"], headers["connection"], headers["content-type"]) == (
        "1",
        "close",
        "application/json",
    )
    data = conn.next_event()
    assert isinstance(data, h11.Data)
    assert json.loads(data.data) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32603, "message": f"Too many connections (limits.{limit}: {value})"},
    }
    assert isinstance(conn.next_event(), h11.EndOfMessage)


async def test_real_clients_read_the_refusal_alike(tmp_path: Path) -> None:
    """httpx2 and Node's fetch (the TypeScript SDK's transport) against a connection over the
    cap: both read a 503 with Retry-After 1 and the same JSON-RPC error."""
    import shutil

    import httpx2

    node = shutil.which("node")
    assert node is not None, "node is needed (./dev test installs it)"
    script = tmp_path / "fetch.mjs"
    script.write_text(
        "const r = await fetch(process.argv[2], {method: 'POST', body: '{}', "
        "headers: {'content-type': 'application/json'}});\n"
        "process.stdout.write(JSON.stringify({status: r.status, retry: r.headers.get('retry-after'), "
        "body: await r.json()}));\n"
    )
    async with running(FakeGateway(), max_connections_per_address=1) as (bound, _stop):
        with trio.fail_after(30):
            held = await connect_from(bound, "127.0.0.1")  # the one place from 127.0.0.1
            async with httpx2.AsyncClient() as http:
                response = await http.post(bound.url, json={})
                by_httpx2 = {
                    "status": response.status_code,
                    "retry": response.headers["retry-after"],
                    "body": response.json(),
                }
            got = await trio.run_process([node, str(script), bound.url], capture_stdout=True)
            by_node = json.loads(got.stdout)
            assert by_httpx2 == by_node
            assert by_node["status"] == 503 and by_node["retry"] == "1"
            assert by_node["body"]["error"]["message"] == "Too many connections (limits.max_connections_per_address: 1)"
            assert await served(held) == 200
