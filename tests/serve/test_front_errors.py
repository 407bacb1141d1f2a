"""Every refusal of the front, by raw HTTP requests (docs/serve.md, "How a request flows"):
the status, the headers and the JSON-RPC error body; the session bound to its user; the
2026-07-28 routing headers checked against the body; SIGTERM's drain."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import trio

from tests.serve.frontfakes import FakeGateway, running

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = "application/json, text/event-stream"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _headers(user: str | None = "alice", **more: str) -> dict[str, str]:
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    if user is not None:
        headers["authorization"] = f"Bearer {user}"
    headers.update({k.replace("_", "-"): v for k, v in more.items()})
    return headers


def _error(response: httpx2.Response) -> dict[str, Any]:
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "error" in body, body
    error: dict[str, Any] = body["error"]
    return error


async def _session(http: httpx2.AsyncClient, url: str, user: str = "alice") -> str:
    response = await http.post(url, json=INIT, headers=_headers(user))
    assert response.status_code == 200, response.text
    assert response.json()["result"]["protocolVersion"] == "2025-11-25"
    session_id = response.headers["mcp-session-id"]
    assert len(session_id) >= 22 and session_id.isascii()  # >= 128 random bits
    return session_id


def _call(msg_id: int, name: str, modern: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {"text": "x"}}
    if modern:
        params["_meta"] = META
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params}


async def test_authentication_origin_and_routes() -> None:
    async with running(FakeGateway()) as (bound, _), httpx2.AsyncClient() as http:
        missing = await http.post(bound.url, json=INIT, headers=_headers(None))
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer resource_metadata=")
        assert _error(missing)["code"] == -32001
        bad = await http.post(bound.url, json=INIT, headers=_headers("bad"))
        assert bad.status_code == 401 and 'error="invalid_token"' in bad.headers["www-authenticate"]
        assert "bad" not in bad.text  # the token is not echoed
        scope = await http.post(bound.url, json=INIT, headers=_headers("noscope"))
        assert scope.status_code == 403 and "insufficient_scope" in scope.headers["www-authenticate"]
        origin = await http.post(bound.url, json=INIT, headers=_headers(origin="http://evil.example"))
        assert origin.status_code == 403 and _error(origin)["code"] == -32600
        allowed = await http.post(bound.url, json=INIT, headers=_headers(origin="http://good.example"))
        assert allowed.status_code == 200
        base = bound.url.removesuffix("/mcp")
        for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
            meta = await http.get(base + path)
            assert meta.status_code == 200 and meta.json() == {"resource": "http://127.0.0.1/mcp"}
        assert (await http.get(base + "/elsewhere")).status_code == 404
        put = await http.put(bound.url, json=INIT, headers=_headers())
        assert put.status_code == 405 and "POST" in put.headers["allow"]
        plain = await http.post(bound.url, content=b"{}", headers={**_headers(), "content-type": "text/plain"})
        assert plain.status_code == 415
        html = await http.post(bound.url, json=INIT, headers={**_headers(), "accept": "text/html"})
        assert html.status_code == 406


async def test_malformed_bodies_are_400_with_json_rpc_errors() -> None:
    gateway = FakeGateway()
    async with running(gateway) as (bound, _), httpx2.AsyncClient() as http:
        cases = [
            (b"{not json", -32700),
            (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600),
            (b'"a string"', -32600),
            (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', -32600),
            (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', -32600),
            (b'{"jsonrpc": "2.0", "id": 1, "method": 5}', -32600),
        ]
        for body, code in cases:
            response = await http.post(bound.url, content=body, headers=_headers())
            assert response.status_code == 400, body
            assert _error(response)["code"] == code, body
        version = await http.post(
            bound.url, json=_call(2, "echo"), headers=_headers(mcp_protocol_version="1999-01-01", mcp_session_id="x")
        )
        assert version.status_code == 400 and _error(version)["code"] == -32022
        assert gateway.opened == [] and gateway.requests == []  # nothing reached the gateway


async def test_body_cap_and_read_timeout() -> None:
    async with running(FakeGateway(), max_body_bytes=1000, read_timeout_s=0.3) as (bound, _):
        async with httpx2.AsyncClient() as http:
            big = {**INIT, "pad": "x" * 5000}
            declared = await http.post(bound.url, json=big, headers=_headers())
            assert declared.status_code == 413 and _error(declared)["code"] == -32600

            async def chunks() -> AsyncIterator[bytes]:
                for _ in range(10):
                    yield b" " * 200

            streamed = await http.post(bound.url, content=chunks(), headers=_headers())
            assert streamed.status_code == 413
        # a client that declares a body and does not send it
        stream = await trio.open_tcp_stream(bound.host, bound.port)
        head = (
            "POST /mcp HTTP/1.1\r\nhost: x\r\nauthorization: Bearer alice\r\ncontent-type: application/json\r\n"
            "content-length: 100\r\n\r\n{"
        )
        await stream.send_all(head.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += await stream.receive_some()
        assert answer.startswith(b"HTTP/1.1 408")
        await stream.aclose()


async def test_session_bound_to_its_user_and_required() -> None:
    gateway = FakeGateway()
    async with running(gateway) as (bound, _), httpx2.AsyncClient() as http:
        sid = await _session(http, bound.url)
        mine = await http.post(bound.url, json=_call(2, "echo"), headers=_headers(mcp_session_id=sid))
        assert mine.status_code == 200 and mine.json()["result"]["content"][0]["text"] == "alice:x"
        theirs = await http.post(bound.url, json=_call(3, "echo"), headers=_headers("bob", mcp_session_id=sid))
        assert theirs.status_code == 404 and _error(theirs)["code"] == -32001
        unknown = await http.post(bound.url, json=_call(4, "echo"), headers=_headers(mcp_session_id="nope"))
        assert unknown.status_code == 404
        none = await http.post(bound.url, json=_call(5, "echo"), headers=_headers())
        assert none.status_code == 400 and _error(none)["code"] == -32600
        assert (await http.delete(bound.url, headers=_headers("bob", mcp_session_id=sid))).status_code == 404
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(bound.url, json=note, headers=_headers(mcp_session_id=sid))).status_code == 202
        assert (await http.delete(bound.url, headers=_headers(mcp_session_id=sid))).status_code == 204
        assert gateway.closed == 1
        gone = await http.post(bound.url, json=_call(6, "echo"), headers=_headers(mcp_session_id=sid))
        assert gone.status_code == 404
        # a related message first: the answer switches to an event stream
        sid = await _session(http, bound.url)
        streamed = await http.post(bound.url, json=_call(7, "progress"), headers=_headers(mcp_session_id=sid))
        assert streamed.headers["content-type"] == "text/event-stream"
        events = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: ")]
        assert [e.get("method") for e in events] == ["notifications/progress", None]
        assert events[-1]["id"] == 7
        # JSON only accepted: the answer stays JSON
        only = await http.post(
            bound.url, json=_call(8, "progress"), headers={**_headers(mcp_session_id=sid), "accept": "application/json"}
        )
        assert only.headers["content-type"] == "application/json" and only.json()["id"] == 8


async def test_answer_framing_and_a_client_going_away() -> None:
    gateway = FakeGateway()
    async with running(gateway) as (bound, _), httpx2.AsyncClient() as http:
        sid = await _session(http, bound.url)
        # a JSON answer says its length (no chunked framing)
        answer = await http.post(bound.url, json=_call(2, "echo"), headers=_headers(mcp_session_id=sid))
        assert answer.headers["content-length"] == str(len(answer.content))
        assert "transfer-encoding" not in answer.headers
        # event streams only accepted: an event stream, even with nothing related before the response
        only = {**_headers(mcp_session_id=sid), "accept": "text/event-stream"}
        streamed = await http.post(bound.url, json=_call(3, "echo"), headers=only)
        assert streamed.headers["content-type"] == "text/event-stream"
        events = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: ")]
        assert [e.get("id") for e in events] == [3]
        # the client goes away while its call is pending: the call is cancelled
        body = json.dumps(_call(4, "block")).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in _headers(mcp_session_id=sid).items())
        raw = f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n{head}content-length: {len(body)}\r\n\r\n"
        stream = await trio.open_tcp_stream(bound.host, bound.port)
        await stream.send_all(raw.encode() + body)
        await gateway.until(lambda: gateway.blocked == 1)
        await stream.aclose()
        with trio.fail_after(10):
            await gateway.until(lambda: gateway.cancelled == 1)
        # and the front still answers
        again = await http.post(bound.url, json=_call(5, "echo"), headers=_headers(mcp_session_id=sid))
        assert again.status_code == 200 and again.json()["id"] == 5


async def test_idle_sessions_are_closed() -> None:
    gateway = FakeGateway()
    async with running(gateway, session_idle_s=0.2) as (bound, _), httpx2.AsyncClient() as http:
        sid = await _session(http, bound.url)
        await gateway.until(lambda: gateway.closed == 1)
        gone = await http.post(bound.url, json=_call(2, "echo"), headers=_headers(mcp_session_id=sid))
        assert gone.status_code == 404


async def test_modern_headers_checked_against_the_body() -> None:
    gateway = FakeGateway()
    async with running(gateway) as (bound, _), httpx2.AsyncClient() as http:
        right = _headers(mcp_protocol_version="2026-07-28", mcp_method="tools/call", mcp_name="echo")
        ok = await http.post(bound.url, json=_call(1, "echo", modern=True), headers=right)
        assert ok.status_code == 200 and ok.json()["result"]["content"][0]["text"] == "alice:x"
        assert "mcp-session-id" not in ok.headers
        encoded = {**right, "mcp-name": "=?base64?ZWNobw==?="}
        assert (await http.post(bound.url, json=_call(2, "echo", modern=True), headers=encoded)).status_code == 200
        for wrong in (
            {"mcp-name": "block"},
            {"mcp-method": "tools/list"},
            {"mcp-protocol-version": "2025-11-25"},
            {"mcp-name": "=?base64?!!!?="},
        ):
            response = await http.post(bound.url, json=_call(3, "echo", modern=True), headers={**right, **wrong})
            assert response.status_code == 400, wrong
            assert _error(response)["code"] == -32020 and response.json()["id"] == 3
        missing = {k: v for k, v in right.items() if k != "mcp-name"}
        response = await http.post(bound.url, json=_call(4, "echo", modern=True), headers=missing)
        assert response.status_code == 400 and _error(response)["code"] == -32020
        discover = {"jsonrpc": "2.0", "id": 5, "method": "server/discover", "params": {"_meta": META}}
        found = await http.post(
            bound.url, json=discover, headers={**right, "mcp-method": "server/discover", "mcp-name": ""}
        )
        assert found.status_code == 200
        result = found.json()["result"]
        assert "2026-07-28" in result["supportedVersions"] and result["capabilities"] == {
            "tools": {"listChanged": True}
        }
        asked = await http.post(bound.url, json=_call(6, "ask", modern=True), headers={**right, "mcp-name": "ask"})
        assert asked.json()["result"]["resultType"] == "input_required"  # passed through as a result
        unknown = {"jsonrpc": "2.0", "id": 7, "method": "nope/nope", "params": {"_meta": META}}
        missing_method = await http.post(bound.url, json=unknown, headers={**right, "mcp-method": "nope/nope"})
        assert missing_method.status_code == 404 and _error(missing_method)["code"] == -32601
        await gateway.until(lambda: gateway.closed == len(gateway.opened))  # each closed after its answer


async def test_per_user_concurrency_cap() -> None:
    gateway = FakeGateway()
    async with running(gateway, per_user_concurrency=2) as (bound, _), httpx2.AsyncClient() as http:
        sid = await _session(http, bound.url)
        answers: list[httpx2.Response] = []
        async with trio.open_nursery() as nursery:
            for n in range(2):
                nursery.start_soon(
                    lambda n=n: _post_into(http, bound.url, _call(10 + n, "block"), sid, answers)  # type: ignore[misc]
                )
            await gateway.until(lambda: gateway.blocked == 2)
            third = await http.post(bound.url, json=_call(12, "echo"), headers=_headers(mcp_session_id=sid))
            assert third.status_code == 429 and third.headers["retry-after"] == "1"
            other = await http.post(bound.url, json=INIT, headers=_headers("bob"))
            assert other.status_code == 200  # another user is not held back
            gateway.release.set()
        assert sorted(r.json()["id"] for r in answers) == [10, 11]


async def _post_into(http: httpx2.AsyncClient, url: str, msg: dict[str, Any], sid: str, into: list[Any]) -> None:
    into.append(await http.post(url, json=msg, headers=_headers(mcp_session_id=sid), timeout=30))


async def test_drain_answers_requests_in_flight_and_refuses_new_ones() -> None:
    gateway = FakeGateway()
    answers: list[httpx2.Response] = []
    async with running(gateway, drain_timeout_s=30) as (bound, stop):
        sid = await _session(httpx2.AsyncClient(), bound.url)
        ended = trio.Event()

        async def listen() -> None:
            async with httpx2.AsyncClient(timeout=30) as http:
                get = _headers(mcp_session_id=sid)
                async with http.stream("GET", bound.url, headers=get) as stream:
                    assert stream.status_code == 200
                    second = await http.get(bound.url, headers=get)
                    assert second.status_code == 409  # one GET stream per session
                    async for _ in stream.aiter_bytes():
                        pass
            ended.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen)
            await gateway.until(lambda: gateway.listening == 1)
            for n in range(5):  # each on its own connection
                client = httpx2.AsyncClient()
                nursery.start_soon(
                    lambda c=client, n=n: _post_into(c, bound.url, _call(20 + n, "block"), sid, answers)  # type: ignore[misc]
                )
            await gateway.until(lambda: gateway.blocked == 5)
            stop.set()
            await trio.testing.wait_all_tasks_blocked()
            try:
                async with httpx2.AsyncClient() as late:
                    refused = await late.post(bound.url, json=INIT, headers=_headers())
                assert refused.status_code == 503
            except httpx2.ConnectError:
                pass  # the listener is closed: refused at connect
            with trio.fail_after(10):  # the drain ends the GET stream (not the 30 s deadline)
                await ended.wait()
            gateway.release.set()
        assert sorted(r.status_code for r in answers) == [200] * 5
        assert sorted(r.json()["id"] for r in answers) == [20, 21, 22, 23, 24]
