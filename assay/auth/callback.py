"""The loopback redirect server of a browser login (the shell; docs/auth.md, "Logging in").

127.0.0.1, the port a stored registration names when it is free (else any), path ``/callback``.
It answers a ``GET /callback`` whose ``state`` is the one of the authorization URL, once, with a
small page; anything else gets a 404 (or a 400 for a wrong or replayed ``state``) and the wait
goes on. A request is read up to 16 KiB for at most 10 s. It listens until the login ends.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import trio

__all__ = ["Callback"]

_PAGE = "<!doctype html><meta charset=utf-8><title>assay</title><p>{text}</p><p>You can close this window.</p>"


class Callback:
    def __init__(self) -> None:
        self.port = 0
        self.expected_state: str | None = None
        self.query: dict[str, str] | None = None
        self.done = trio.Event()
        self._listener: trio.SocketListener | None = None

    async def open(self, port: int = 0) -> str:
        """Listen (on ``port`` when it is free, else on any); the redirect URI."""
        sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
        # the port of an earlier login may still have connections in TIME_WAIT: it is free to listen on
        sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_REUSEADDR, 1)
        try:
            await sock.bind(("127.0.0.1", port))
        except OSError:
            if port == 0:
                sock.close()
                raise
            await sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        self.port = sock.getsockname()[1]
        self._listener = trio.SocketListener(sock)
        return f"http://127.0.0.1:{self.port}/callback"

    def expect(self, state: str) -> None:
        """A new authorization round: wait for ``state``."""
        self.expected_state = state
        self.query = None
        self.done = trio.Event()

    async def serve(self) -> None:
        """Answer requests until cancelled (the login ends)."""
        assert self._listener is not None
        try:
            while True:
                stream = await self._listener.accept()
                with trio.move_on_after(10):
                    await self._answer(stream)
                await stream.aclose()
        finally:
            await self._listener.aclose()

    async def _answer(self, stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 16384:
            chunk = await stream.receive_some(4096)
            if not chunk:
                return
            data += chunk
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        target = urlsplit(parts[1]) if len(parts) == 3 else None
        if target is None or parts[0] != "GET" or target.path != "/callback":
            await self._reply(stream, 404, "Not found.")
            return
        query = {k: v[0] for k, v in parse_qs(target.query, keep_blank_values=True).items()}
        if self.expected_state is None or query.get("state") != self.expected_state:
            await self._reply(stream, 400, "This answer does not belong to the login in progress.")
            return
        ok = "code" in query and "error" not in query
        await self._reply(stream, 200, "assay is logged in." if ok else "The authorization was refused.")
        self.query = query
        self.expected_state = None  # each round's answer is taken once
        self.done.set()

    @staticmethod
    async def _reply(stream: trio.SocketStream, status: int, text: str) -> None:
        body = _PAGE.format(text=text).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        )
        try:
            await stream.send_all(head.encode() + body)
        except trio.BrokenResourceError:
            pass
