"""The token store (docs/auth.md, "Where tokens live"): hostile or corrupt files are one line,
never a traceback or a hang; the loopback callback (docs/auth.md, "Logging in")."""

from __future__ import annotations

import json
import os
import stat

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.shells.upstream_http import tokens
from assay.auth.callback import Callback
from assay.auth.lines import NeedsLogin
from tests.remote.conftest import assay, wrap_auth

URL = "http://127.0.0.1:9/mcp"


def _record() -> dict:
    return {
        "version": 1,
        "url": URL,
        "tokens": {"access_token": "a", "token_type": "Bearer"},
        "expires_at": None,
        "client_info": {"client_id": "c", "redirect_uris": ["http://127.0.0.1:1/callback"]},
    }


def _path(state) -> str:
    os.makedirs(tokens.oauth_dir(str(state)), mode=0o700, exist_ok=True)
    return tokens.record_path(str(state), URL)


def test_normalize_url():
    assert tokens.normalize_url("HTTPS://Example.COM:443/mcp#x") == "https://example.com/mcp"
    assert tokens.normalize_url("http://127.0.0.1:8080/mcp?a=1") == "http://127.0.0.1:8080/mcp?a=1"
    for bad in ("ftp://x/", "mcp", "http://u:p@h/", "http://h:99999/"):
        with pytest.raises(ValueError):
            tokens.normalize_url(bad)


def test_save_is_private_and_atomic(state):
    path = tokens.save(str(state), _record())
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".tmp-")] == []
    assert tokens.load(str(state), URL)["tokens"]["access_token"] == "a"


def _hostile(kind: str, path: str, tmp_path) -> None:
    if kind == "not json":
        open(path, "w").write("{nope")
    elif kind == "wrong shape":
        open(path, "w").write(json.dumps({"version": 1, "url": URL, "tokens": "x"}))
    elif kind == "other url":
        open(path, "w").write(json.dumps({**_record(), "url": "http://127.0.0.1:10/mcp"}))
    elif kind == "symlink":
        (tmp_path / "elsewhere.json").write_text(json.dumps(_record()))
        os.symlink(tmp_path / "elsewhere.json", path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "huge":
        with open(path, "w") as f:
            f.write('{"version": 1, "url": "' + "x" * (tokens.MAX_BYTES + 10) + '"}')
    elif kind == "directory":
        os.mkdir(path)


KINDS = ["not json", "wrong shape", "other url", "symlink", "fifo", "huge", "directory"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_token_file_is_one_line(kind, state, tmp_path, env):
    path = _path(state)
    _hostile(kind, path, tmp_path)
    with pytest.raises(NeedsLogin) as caught:
        wrap_auth(URL, state)
    assert "\n" not in str(caught.value) and path in str(caught.value)
    res = assay("mcp", "auth", "list", "--state-dir", str(state), env=env, timeout=60)
    assert res.returncode == 0 and "Traceback" not in res.stderr
    assert [x for x in res.stderr.splitlines() if x.startswith("assay: warning: the token file")], res.stderr


@settings(max_examples=200, deadline=None)
@given(
    st.binary(max_size=400)
    | st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=4),
        max_leaves=12,
    ).map(lambda v: json.dumps(v).encode())
)
def test_any_content_is_a_record_or_one_line(tmp_path_factory, content):
    state = tmp_path_factory.mktemp("s")
    path = _path(state)
    with open(path, "wb") as f:
        f.write(content)
    try:
        tokens.load(str(state), URL)
    except tokens.TokenFileError as exc:
        assert "\n" not in str(exc)


async def test_the_callback_checks_state_and_answers_once():
    callback = Callback()
    redirect = await callback.open()
    callback.expect("good")

    async def get(target: str) -> bytes:
        stream = await trio.open_tcp_stream("127.0.0.1", callback.port)
        await stream.send_all(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b""
        while chunk := await stream.receive_some(4096):
            data += chunk
        await stream.aclose()
        return data

    async with trio.open_nursery() as nursery:
        nursery.start_soon(callback.serve)
        assert (await get("/favicon.ico")).startswith(b"HTTP/1.1 404")
        assert (await get("/callback?code=c&state=bad")).startswith(b"HTTP/1.1 400")
        assert not callback.done.is_set()
        assert (await get("/callback?code=c&state=good&iss=i")).startswith(b"HTTP/1.1 200")
        assert callback.done.is_set() and callback.query == {"code": "c", "state": "good", "iss": "i"}
        assert (await get("/callback?code=c2&state=good")).startswith(b"HTTP/1.1 400")  # taken once
        nursery.cancel_scope.cancel()
    assert redirect == f"http://127.0.0.1:{callback.port}/callback"


async def test_no_answer_from_the_browser_is_bounded():
    from assay.auth import flows
    from assay.auth.discovery import check_server
    from assay.auth.web import Web

    server = check_server(
        {
            "issuer": "https://as.example",
            "token_endpoint": "https://as.example/token",
            "authorization_endpoint": "https://as.example/authorize",
            "code_challenge_methods_supported": ["S256"],
        },
        "https://as.example",
        "test",
    )
    lines: list[str] = []
    async with Web() as web:
        ctx = flows.Context(web, {}, say=lines.append, no_browser=True, timeout=0.2)
        with pytest.raises(flows.FlowError, match="no answer from the browser within 0.2 s"):
            await flows.browser_login(
                ctx, server, URL, "mcp", {"client_id": "c", "registered": "pre"}, {"kind": "authorization_code"}
            )
    assert lines[0].startswith("open this URL in a browser") and "code_challenge_method=S256" in lines[0]
