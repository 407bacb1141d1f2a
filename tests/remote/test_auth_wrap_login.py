"""wrap logs in itself when a person can be reached on this machine (docs/auth.md, "Logging in
from wrap"): `--login auto` (the default where a browser can be opened) on first use and on a
step-up, one login at a time across the wraps of a client, and the token it stores is the one
`auth list` shows and `auth logout` removes. wrap runs as a real process driven by the MCP SDK's
stdio client; the browser is a script ($BROWSER) that follows the redirect."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import ASSAY
from tests.remote.conftest import AuthServer, assay

POLICY = 'version: "2.0"\nname: remote\ntools:\n  allow: ["echo"]\n'
GATED_BROWSER = f"""#!{sys.executable}
import os, sys, urllib.request
with open(os.environ["BROWSER_LOG"], "a") as log:
    log.write(sys.argv[1] + "\\n")
with open(os.environ["BROWSER_GATE"]) as gate:  # blocks until the test opens it, then waits for a line
    gate.readline()
with urllib.request.urlopen(sys.argv[1], timeout=60) as answer:
    answer.read()
"""


def _params(server: AuthServer, state: Path, env: dict[str, str], tmp_path: Path, *extra: str) -> StdioServerParameters:
    policy = tmp_path / "assay.yaml"
    policy.write_text(POLICY)
    return StdioServerParameters(
        command=str(ASSAY),
        args=["mcp", "wrap", "--policy", str(policy), "--state-dir", str(state), *extra, "--url", server.url],
        env=env,
    )


async def _session(params: StdioServerParameters, errlog: Path, text: str) -> str:
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                assert [t.name for t in (await session.list_tools()).tools] == ["echo"]
                called = await session.call_tool("echo", {"text": text})
                return str(called.content[0].text)  # type: ignore[union-attr]


async def test_first_use_logs_in_through_the_browser_and_auth_list_and_logout_see_it(auth_server, state, env, tmp_path):
    assert await _session(_params(auth_server, state, env, tmp_path), tmp_path / "err", "first") == "echo:first"
    stats = auth_server.stats()
    assert stats["register"] == 1 and len(stats["authorize"]) == 1
    assert "logging in to" in (tmp_path / "err").read_text()
    listed = assay("mcp", "auth", "list", "--state-dir", str(state), env=env)
    assert listed.returncode == 0 and auth_server.url in listed.stdout and auth_server.base in listed.stdout
    # a second wrap reuses the stored token: no browser, no new registration
    assert await _session(_params(auth_server, state, env, tmp_path), tmp_path / "err2", "again") == "echo:again"
    assert auth_server.stats()["register"] == 1 and len(auth_server.stats()["authorize"]) == 1
    out = assay("mcp", "auth", "logout", auth_server.url, "--state-dir", str(state), env=env)
    assert out.returncode == 0 and not list((state / "oauth").glob("*.json"))


async def test_a_step_up_in_a_session_logs_in_again_with_the_scopes_held_and_asked(auth_server, state, env, tmp_path):
    """The call the server refuses with insufficient_scope waits for the login, then goes."""
    res = assay("mcp", "auth", "login", auth_server.url, "--state-dir", str(state), env=env)
    assert res.returncode == 0, res.stderr
    with (tmp_path / "err").open("w") as err:
        async with stdio_client(_params(auth_server, state, env, tmp_path), errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()
                auth_server.post("/test/require?scope=mcp%20admin")
                called = await session.call_tool("echo", {"text": "more"})
                assert called.content[0].text == "echo:more"  # type: ignore[union-attr]
    stats = auth_server.stats()
    assert [a["scope"] for a in stats["authorize"]] == ["mcp", "mcp admin"]
    assert stats["register"] == 1  # the stored registration was used again


def test_with_login_never_or_no_browser_wrap_says_what_to_run(auth_server, state, env, tmp_path):
    policy = tmp_path / "assay.yaml"
    policy.write_text(POLICY)
    bare = {k: v for k, v in env.items() if k not in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY")}
    for extra, environ in ((["--login", "never"], env), ([], bare)):
        run = subprocess.run(
            [
                str(ASSAY),
                "mcp",
                "wrap",
                "--policy",
                str(policy),
                "--state-dir",
                str(state),
                *extra,
                "--url",
                auth_server.url,
            ],
            env=environ,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert run.returncode == 2, run.stderr
        assert run.stderr.splitlines()[-1] == (
            f"fatal: {auth_server.url} needs authorization and no login is "
            f"stored; run: assay mcp auth login {auth_server.url}"
        )
    assert auth_server.stats()["authorize"] == []
    bad = subprocess.run(
        [str(ASSAY), "mcp", "wrap", "--login", "sometimes", "--url", auth_server.url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert bad.returncode == 2 and "--login must be one of auto, never" in bad.stderr


async def test_two_wraps_of_one_server_log_in_once(auth_server, state, env, tmp_path):
    """The first wrap holds the lock while its browser is open; the second, refused too, waits
    for it and takes the token the first stored."""
    browser = tmp_path / "gated-browser"
    browser.write_text(GATED_BROWSER)
    browser.chmod(0o755)
    gate, log = tmp_path / "gate", tmp_path / "browser.log"
    os.mkfifo(gate)
    env = {**env, "BROWSER": str(browser), "BROWSER_GATE": str(gate), "BROWSER_LOG": str(log)}
    results: dict[str, str] = {}

    async def one(name: str) -> None:
        results[name] = await _session(
            _params(auth_server, state, env, tmp_path / name), tmp_path / f"{name}.err", name
        )

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, "a")
            nursery.start_soon(one, "b")
            await _release_the_browser(auth_server, gate)
    assert results == {"a": "echo:a", "b": "echo:b"}
    assert len(log.read_text().splitlines()) == 1  # one browser, one login
    assert len(auth_server.stats()["authorize"]) == 1 and auth_server.stats()["register"] == 1


async def _release_the_browser(auth_server: AuthServer, gate: Path) -> None:
    """Once a browser opened the gate and both wraps were refused, let the browser go on."""
    opened = await trio.to_thread.run_sync(lambda: open(gate, "w"), abandon_on_cancel=True)
    while auth_server.stats()["mcp_401"] < 2:  # the other wrap was refused too, and waits
        await trio.sleep(0.05)
    opened.write("go\n")
    opened.close()


def test_where_a_browser_can_be_opened():
    from assay.auth.browser import can_open, commands

    never = lambda *_a, **_k: None  # noqa: E731  (no xdg-open on the PATH)
    found = lambda *_a, **_k: "/usr/bin/xdg-open"  # noqa: E731
    assert can_open({"BROWSER": "firefox"}, "linux", which=never)
    assert not can_open({}, "linux", which=found)
    assert not can_open({"DISPLAY": ":0"}, "linux", which=never)
    assert can_open({"DISPLAY": ":0"}, "linux", which=found)
    assert can_open({"WAYLAND_DISPLAY": "wayland-0"}, "freebsd", which=found)
    assert can_open({}, "darwin", which=never)
    assert not can_open({"SSH_CONNECTION": "1 2 3 4"}, "darwin", which=never)
    assert not can_open({"BROWSER": "  "}, "linux", which=never)
    url = "http://127.0.0.1:1/authorize?a=1&b=2"
    assert commands(url, {"BROWSER": "firefox:lynx -dump '%s'"}, "linux") == [["firefox", url], ["lynx", "-dump", url]]
    assert commands(url, {"DISPLAY": ":0"}, "linux") == [["xdg-open", url]]
    assert commands(url, {}, "darwin") == [["open", url]]
    assert commands(url, {}, "linux") == []


SLOW_BROWSER = f"""#!{sys.executable}
import sys, time, urllib.request
time.sleep(1.5)  # the person takes longer than --connect-timeout to log in
with urllib.request.urlopen(sys.argv[1], timeout=60) as answer:
    answer.read()
"""


async def test_a_login_at_start_is_not_cut_by_the_connect_timeout(auth_server, state, env, tmp_path):
    """The start probe's deadline (--connect-timeout) is the server's, not the person's: a login
    in the browser that takes longer still ends in a session (docs/remote.md, "Start")."""
    browser = tmp_path / "slow-browser"
    browser.write_text(SLOW_BROWSER)
    browser.chmod(0o755)
    params = _params(auth_server, state, {**env, "BROWSER": str(browser)}, tmp_path, "--connect-timeout", "0.5")
    assert await _session(params, tmp_path / "err", "slow") == "echo:slow"
    assert len(auth_server.stats()["authorize"]) == 1
