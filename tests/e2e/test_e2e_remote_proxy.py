"""End to end: `assay mcp wrap --url` and the proxies of the environment (docs/remote.md,
"Proxies"). A real forward proxy on loopback (tests/e2e/remote_proxy.py) records every request
that reaches it and forwards it to the real MCP server (tests/e2e/remote_server.py).

A loopback target is always reached directly, whatever the proxy variables say, so a token for
it never goes to a proxy in clear text; another host is reached through the proxy the variables
name (here a name that does not exist: only the proxy can reach it).
"""

from __future__ import annotations

import pytest
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from _e2e_support import RUN_TIMEOUT, assert_all_ended
from _remote_support import recording_proxy, remote_run, remote_server

TOKEN = "e2e-proxy-token-7c1d"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


async def _session(run, env: dict[str, str]) -> str:
    """initialize, tools/list, one echo through wrap; the echo's text."""
    params = StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=env)
    with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()
                result = await session.call_tool("echo", {"message": "via?"})
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_loopback_target_never_goes_through_the_proxy(tmp_path, base_env, host):
    """docs/remote.md, "Proxies": every proxy variable names the recording proxy and NO_PROXY is
    not set; a `--url http://<loopback>:...` with a token is reached directly: the session works
    and not one request reaches the proxy."""
    server_env = {**base_env, "E2E_EXPECT_AUTH": f"Bearer {TOKEN}"}
    async with remote_server(tmp_path, server_env) as server, recording_proxy(tmp_path, base_env, server.url) as proxy:
        env = {k: v for k, v in base_env.items() if k.lower() != "no_proxy"}
        env.update({var: proxy.url for var in PROXY_VARS}, TOKEN=TOKEN)
        url = server.url.replace("127.0.0.1", host)
        run = remote_run(tmp_path, url, extra=["--header", "Authorization: Bearer ${TOKEN}"])
        text = await _session(run, env)
        assert server.ran() == ["echo"]
        assert [ln for ln in proxy.lines if ln.startswith("PROXIED")] == []
    assert text == "echo: via?"
    await assert_all_ended(run.pids()[0])


async def test_another_host_goes_through_the_proxy_the_environment_names(tmp_path, base_env):
    """docs/remote.md, "Proxies": `--url http://mcp.example.test/mcp --allow-insecure-http`
    (a name that resolves nowhere) with HTTP_PROXY set: every request goes to the proxy, which
    forwards it to the server, token and all."""
    server_env = {**base_env, "E2E_EXPECT_AUTH": f"Bearer {TOKEN}"}
    async with remote_server(tmp_path, server_env) as server, recording_proxy(tmp_path, base_env, server.url) as proxy:
        env = {k: v for k, v in base_env.items() if k.lower() not in {"no_proxy", *map(str.lower, PROXY_VARS)}}
        env.update(HTTP_PROXY=proxy.url, TOKEN=TOKEN)
        run = remote_run(
            tmp_path,
            "http://mcp.example.test/mcp",
            extra=["--allow-insecure-http", "--header", "Authorization: Bearer ${TOKEN}"],
        )
        text = await _session(run, env)
        proxied = [ln for ln in proxy.lines if ln.startswith("PROXIED")]
    assert text == "echo: via?"
    assert len(proxied) >= 4, proxied  # the probe, initialize, initialized, tools/list, tools/call
    assert all(ln.split()[2].startswith("http://mcp.example.test/") for ln in proxied), proxied
    assert all(ln.endswith("auth=yes") for ln in proxied), proxied
