"""`wrap --url`'s checks before anything connects, and the JSON-RPC side of the HTTP shell
(docs/remote.md, "Options", "Requests and headers")."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.shells.upstream_http.messages import as_line, error_line, header_value, incoming, outgoing
from assay.shells.upstream_http.target import TargetError, is_loopback, shown_url, target_from


def _target(url="https://mcp.example.test/mcp", headers=(), environ=None, **kw):
    kw.setdefault("transport", "auto")
    kw.setdefault("ca_file", None)
    kw.setdefault("allow_insecure_http", False)
    return target_from(url, headers=list(headers), environ=environ or {}, **kw)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.1", "[::1]", "localhost", "a.localhost"])
def test_plain_http_to_loopback_is_allowed(host):
    assert _target(f"http://{host}:8000/mcp").url.startswith("http://")
    assert is_loopback(host)


def test_plain_http_elsewhere_needs_the_flag():
    with pytest.raises(TargetError, match="--allow-insecure-http"):
        _target("http://mcp.example.test/mcp")
    assert _target("http://mcp.example.test/mcp", allow_insecure_http=True)


@pytest.mark.parametrize(
    "url", ["ftp://x/y", "https:///nohost", "mcp.example.test", "https://u:p@h/x", "https://h/x y", "https://h:99999/x"]
)
def test_bad_urls(url):
    with pytest.raises(TargetError):
        _target(url)


def test_headers_expand_variables_and_never_show_values():
    secret = "tok-" + "x" * 20
    target = _target(headers=["Authorization: Bearer ${TOKEN}", "X-Team:  a b "], environ={"TOKEN": secret})
    assert target.headers == (("Authorization", f"Bearer {secret}"), ("X-Team", "a b"))
    assert target.digest_argv() == ["--url", target.url, "--header", "Authorization", "--header", "X-Team"]
    for bad in [
        "Authorization Bearer x",
        ": x",
        "Bad Name: x",
        "Mcp-Session-Id: x",
        "accept: x",
        "X: a\nb",
        "X: ${MISSING}",
        "X: \x00",
    ]:
        with pytest.raises(TargetError) as info:
            _target(headers=[bad], environ={"TOKEN": secret})
        assert secret not in str(info.value) and "\n" not in str(info.value)


def test_the_bearer_and_optional_header_forms_of_codex():
    # docs/remote.md, "Options": --bearer-env VAR is Codex's bearer_token_env_var (unset or empty
    # is fatal), --header-env-if-set Name=VAR its env_http_headers (unset or blank: no header)
    secret = "tok-" + "y" * 20
    environ = {"TOKEN": f" {secret} ", "KEY": "k1", "BLANK": "  "}
    target = _target(
        bearer_env="TOKEN", header_env_if_set=["X-Api-Key=KEY", "X-Other=BLANK", "X-Gone=UNSET"], environ=environ
    )
    assert target.headers == (("X-Api-Key", "k1"), ("Authorization", f"Bearer {secret}"))
    assert target.digest_argv() == ["--url", target.url, "--header", "X-Api-Key", "--header", "Authorization"]
    for kw, words in (
        ({"bearer_env": "UNSET"}, "UNSET is not set"),
        ({"bearer_env": "BLANK"}, "BLANK is empty"),
        ({"bearer_env": "BAD NAME"}, "must name an environment variable"),
        ({"bearer_env": "TOKEN", "header_env": ["Authorization=KEY"]}, "another --header"),
        ({"header_env_if_set": ["Bad Name=KEY"]}, "--header-env-if-set must be"),
        ({"header_env_if_set": ["Accept=KEY"]}, "--header-env-if-set Accept: wrap sets this header"),
        ({"header_env_if_set": ["X=NL"]}, "line break"),
    ):
        with pytest.raises(TargetError, match=words) as info:
            _target(environ={**environ, "NL": "a\nb"}, **kw)
        assert secret not in str(info.value) and "\n" not in str(info.value)


def test_shown_url_hides_the_query_and_user():
    assert shown_url("https://h:8443/mcp?key=s3cret") == "https://h:8443/mcp?…"
    assert "s3cret" not in shown_url("https://me:s3cret@h/mcp")


def test_routing_headers_of_a_modern_request():
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    line = (
        json.dumps(
            {"jsonrpc": "2.0", "id": "7", "method": "tools/call", "params": {"name": "café", "_meta": meta}}
        ).encode()
        + b"\n"
    )
    out = outgoing(line)
    assert (out.kind, out.id, out.method) == ("request", "7", "tools/call")
    headers = dict(out.headers)
    assert headers["MCP-Protocol-Version"] == "2026-07-28" and headers["Mcp-Method"] == "tools/call"
    assert base64.b64decode(headers["Mcp-Name"][len("=?base64?") : -2]).decode() == "café"
    old = outgoing(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}')
    assert old.headers == ()  # a 2025-era frame: the session's negotiated version is sent instead
    assert outgoing(b'{"jsonrpc":"2.0","method":"notifications/initialized"}').kind == "notification"
    assert outgoing(b'{"jsonrpc":"2.0","id":3,"result":{}}').kind == "response"


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_header_values_survive_http(value):
    shown = header_value(value)
    assert all(0x20 <= ord(c) <= 0x7E for c in shown)
    if shown != value:
        assert base64.b64decode(shown[len("=?base64?") : -2]) == value.encode("utf-8", "surrogatepass")


def test_incoming_and_error_lines():
    big = 123456789012345678901234567890
    seen = incoming(f'{{"jsonrpc":"2.0","id":{big},"result":{{"protocolVersion":"2025-06-18"}}}}'.encode())
    assert (seen.kind, seen.id, seen.protocol_version) == ("response", big, "2025-06-18")
    line = error_line("a\u00e9", "assay: upstream error: x", {"status": 500})
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": "a\u00e9",
        "error": {"code": -32000, "message": "assay: upstream error: x", "data": {"status": 500}},
    }
    assert as_line(b'{\r\n "a": 1\n}') == b'{   "a": 1 }\n'
    assert as_line(b" \n ") is None


def test_header_env_takes_a_whole_value_from_the_environment():
    value = "Bearer ${NOT_EXPANDED} " + "y" * 20
    target = target_from(
        "https://h/mcp",
        transport="auto",
        headers=[],
        header_env=["Authorization=ASSAY_HEADER_1"],
        ca_file=None,
        allow_insecure_http=False,
        environ={"ASSAY_HEADER_1": value},
    )
    assert target.headers == (("Authorization", value.strip()),)
    assert target.digest_argv() == ["--url", "https://h/mcp", "--header", "Authorization"]
    for bad, environ in (
        ("Authorization", {}),
        ("Authorization=1X", {}),
        ("Bad Name=V", {"V": "x"}),
        ("Authorization=MISSING", {}),
        ("Accept=V", {"V": "x"}),
        ("A=V", {"V": "a\r\nb"}),
    ):
        with pytest.raises(TargetError) as info:
            target_from(
                "https://h/mcp",
                transport="auto",
                headers=[],
                header_env=[bad],
                ca_file=None,
                allow_insecure_http=False,
                environ=environ,
            )
        assert "a\r\nb" not in str(info.value)


def test_every_header_form_names_the_variable_its_value_comes_from() -> None:
    # a 401 names the refused header and where its value comes from (docs/remote.md): the
    # Codex forms (--header-env-if-set, --bearer-env) carry their variable as --header-env does
    env = {"A": "1", "B": "2", "TOKEN": "t0k"}
    target = target_from(
        "http://127.0.0.1:9/mcp",
        transport="auto",
        headers=("X-One: ${A}",),
        header_env=("X-Two=B",),
        header_env_if_set=("X-Gone=UNSET", "X-Three=A"),
        bearer_env="TOKEN",
        ca_file=None,
        allow_insecure_http=False,
        environ=env,
    )
    assert target.header_sources == [("X-One", "A"), ("X-Two", "B"), ("X-Three", "A"), ("Authorization", "TOKEN")]
