"""The OAuth requests follow the one routing rule of assay's HTTP clients (docs/auth.md, "What is
sent where"; assay/shells/upstream_http/client.py): with HTTP_PROXY and HTTPS_PROXY set and no NO_PROXY, a
login to a server on this machine reaches it directly, and the proxy (a real listener on
loopback that records what reaches it) sees nothing; a host that is not loopback goes to it."""

from __future__ import annotations

import os

import trio

from assay.shells.upstream_http.client import http_client
from tests.remote.conftest import assay


async def _recording_proxy(seen: list[bytes], task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    async def handle(stream: trio.SocketStream) -> None:
        data = await stream.receive_some(65536)
        seen.append(data.split(b"\r\n", 1)[0])
        await stream.send_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await stream.aclose()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handle, listeners)


async def test_a_login_to_this_machine_never_goes_through_the_proxy(auth_server, state, env, monkeypatch):
    seen: list[bytes] = []
    async with trio.open_nursery() as nursery:
        port = await nursery.start(_recording_proxy, seen)
        proxy = f"http://127.0.0.1:{port}"
        proxied = {
            **env,
            "HTTP_PROXY": proxy,
            "HTTPS_PROXY": proxy,
            "http_proxy": proxy,
            "https_proxy": proxy,
            "ALL_PROXY": proxy,
            "NO_PROXY": "",
            "no_proxy": "",
        }
        res = await trio.to_thread.run_sync(
            lambda: assay("mcp", "auth", "login", auth_server.url, "--state-dir", str(state), env=proxied)
        )
        assert res.returncode == 0, res.stderr
        assert seen == []
        # a client built by the same rule, asked for a host that is not loopback: the proxy has it
        for name in ("HTTP_PROXY", "http_proxy"):
            monkeypatch.setenv(name, proxy)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        async with http_client(dict(os.environ)) as client:
            assert (await client.get("http://mcp.example/x")).status_code == 502
        nursery.cancel_scope.cancel()
    assert seen == [b"GET http://mcp.example/x HTTP/1.1"]
