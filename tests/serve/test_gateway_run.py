"""run_serve with a front of the test's own (docs/serve.md, "Upstreams and the agent session of a
user"): the policy loaded, the state directory's store shared by a user's links, a bad policy one
line (exit 2)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import trio

from assay.gateway.config import ConfigError, ServeConfig
from assay.serve.run import run_serve, store_of
from gwsupport import POLICY, Client, stdio, text_of, user


async def _nobody(authorization: str | None) -> Any:
    raise AssertionError("not called")


async def test_run_serve_serves_the_gateway_and_the_user_session_is_in_the_store(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    config = ServeConfig(
        base_dir=str(tmp_path), policy="policy.yaml", upstreams=(stdio("local"),), state_dir=str(tmp_path / "state")
    )
    seen: dict[str, Any] = {}

    async def serve_http(*, gateway: Any, listen: str, **kwargs: Any) -> None:
        seen["listen"] = listen
        conversation, _ = await gateway.open(user("alice"), {"params": {"protocolVersion": "2025-06-18"}})
        client = Client(conversation)
        seen["secret"] = text_of(await client.call("local__read_secret"))
        seen["send"] = await client.call("local__send", {"text": "x"})

    with trio.fail_after(60):
        await run_serve(config, listen=None, authenticate=_nobody, serve_http=serve_http, warn=lambda _: None)
    assert seen["listen"] == "127.0.0.1:8787" and seen["secret"] == "the plans are in the drawer"
    assert seen["send"]["result"]["isError"] is True
    store = store_of(config, {})()
    rows = await store.sessions(time.time())
    await store.aclose()
    assert [(r.key, r.kind, r.name) for r in rows] == [("user:https://issuer.test#alice", "user", "alice")]
    assert [s.server for s in rows[0].servers] == ["local"]


async def test_a_bad_policy_is_one_config_error(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text("version: [\n")
    config = ServeConfig(base_dir=str(tmp_path), policy="policy.yaml", upstreams=(stdio("local"),))

    async def serve_http(**kwargs: Any) -> None:
        raise AssertionError("not reached")

    with pytest.raises(ConfigError) as caught:
        await run_serve(config, listen=None, authenticate=_nobody, serve_http=serve_http, warn=lambda _: None)
    assert len(caught.value.problems) == 1 and "policy" in caught.value.problems[0]


def test_session_list_shows_a_user_session_by_its_subject() -> None:
    from assay.cli.session import _table

    row = {
        "key": "user:https://i#alice",
        "kind": "user",
        "name": "alice",
        "process": None,
        "alive": True,
        "servers": [{"server": "local", "calls": 2}],
        "calls": 2,
        "armed": [],
        "last": 0.0,
    }
    assert _table([row])[1].split()[:2] == ["user:https://i#alice", "alice"]


def test_a_user_session_expires_after_a_week_without_a_call_whatever_its_liveness() -> None:
    from assay.policy.storeapi import NAMED_IDLE, SessionKey, expired
    from assay.store.keys import client_alive

    key = SessionKey(key="user:https://i#alice", kind="user", name="alice")
    assert client_alive(key) is True
    assert not expired(key, 0.0, NAMED_IDLE - 1, client_alive)
    assert expired(key, 0.0, NAMED_IDLE + 1, client_alive)
