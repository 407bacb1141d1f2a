"""Which proxy a request of wrap goes through, and which hosts are loopback (docs/remote.md,
"Proxies", "Options"): in memory, and differentially against the system's resolver (what a
connection to the host reaches) and h11 (what a header value becomes on the wire)."""

from __future__ import annotations

import ipaddress
import socket

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.shells.upstream_http.messages import header_safe, visible_ascii
from assay.shells.upstream_http.proxies import ProxyError, no_proxy_matches, proxy_for
from assay.shells.upstream_http.target import is_loopback

PROXY = "http://proxy.example.test:3128"
EVERY = {var: PROXY for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")}


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/mcp",
        "https://127.9.9.9/mcp",
        "http://localhost:1/",
        "http://LOCALHOST./",
        "http://mcp.localhost/",
        "http://[::1]:80/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0:8000/",
        "http://[::]/",
        "http://127.1/",
        "http://2130706433/",
        "http://0x7f.0.0.1/",
    ],
)
def test_a_loopback_host_never_goes_through_a_proxy(url):
    assert proxy_for(url, EVERY) is None


@pytest.mark.parametrize(
    ("url", "environ", "want"),
    [
        ("https://mcp.example.com/mcp", {"HTTPS_PROXY": "http://a:1"}, "http://a:1"),
        ("http://mcp.example.com/mcp", {"HTTPS_PROXY": "http://a:1"}, None),
        ("http://mcp.example.com/mcp", {"HTTP_PROXY": "b:2"}, "http://b:2"),
        ("https://mcp.example.com/mcp", {"ALL_PROXY": "http://c:3"}, "http://c:3"),
        ("https://mcp.example.com/mcp", {"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:1"}, "http://low:1"),
        ("https://mcp.example.com/mcp", {"https_proxy": "", "HTTPS_PROXY": "http://up:1"}, "http://up:1"),
        ("http://mcp.example.com/mcp", {"HTTP_PROXY": "http://cgi:1", "REQUEST_METHOD": "GET"}, None),
        ("http://mcp.example.com/mcp", {"http_proxy": "http://ok:1", "REQUEST_METHOD": "GET"}, "http://ok:1"),
        ("https://mcp.example.com/mcp", {**EVERY, "NO_PROXY": "*"}, None),
        ("https://mcp.example.com/mcp", {**EVERY, "NO_PROXY": "example.com"}, None),
        ("https://example.com/mcp", {**EVERY, "no_proxy": ".example.com"}, None),
        ("https://a.b.example.com/mcp", {**EVERY, "NO_PROXY": "*.example.com"}, None),
        ("https://badexample.com/mcp", {**EVERY, "NO_PROXY": "example.com"}, PROXY),
        ("https://mcp.example.com:8443/mcp", {**EVERY, "NO_PROXY": "mcp.example.com:443"}, PROXY),
        ("https://mcp.example.com/mcp", {**EVERY, "NO_PROXY": "other, mcp.example.com:443"}, None),
        ("https://10.1.2.3/mcp", {**EVERY, "NO_PROXY": "10.0.0.0/8"}, None),
        ("https://10.1.2.3/mcp", {**EVERY, "NO_PROXY": "10.1.2.3"}, None),
        ("https://11.1.2.3/mcp", {**EVERY, "NO_PROXY": "10.0.0.0/8"}, PROXY),
        ("https://[2001:db8::1]/mcp", {**EVERY, "NO_PROXY": "[2001:db8::1]:443"}, None),
        ("https://[2001:db8::1]/mcp", {**EVERY, "NO_PROXY": "2001:db8::/32"}, None),
        ("https://mcp.example.com/mcp", {}, None),
    ],
)
def test_the_variables_of_the_environment(url, environ, want):
    assert proxy_for(url, environ) == want


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("socks5://p:1080", "SOCKS"),
        ("socks5h://p:1080", "SOCKS"),
        ("ftp://p:21", "http://"),
        ("http://p:99999", "not a proxy URL"),
    ],
)
def test_a_proxy_wrap_cannot_use_is_one_line_naming_the_variable(value, match):
    with pytest.raises(ProxyError, match=match) as caught:
        proxy_for("https://mcp.example.com/mcp", {"HTTPS_PROXY": value})
    assert "HTTPS_PROXY" in str(caught.value) and "\n" not in str(caught.value)
    assert "p:1080" not in str(caught.value)  # the value (it may hold a password) is not shown


_label = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)
_hosts = st.one_of(
    st.lists(_label, min_size=1, max_size=4).map(".".join),
    st.ip_addresses().map(lambda a: f"[{a}]" if a.version == 6 else str(a)),
    st.sampled_from(["localhost", "127.0.0.1", "[::1]", "0.0.0.0"]),
)


@settings(max_examples=300, deadline=None)
@given(
    _hosts,
    st.sampled_from(["http", "https"]),
    st.text(max_size=40),
    st.dictionaries(
        st.sampled_from(["HTTP_PROXY", "https_proxy", "ALL_PROXY", "REQUEST_METHOD"]),
        st.sampled_from(["http://p:1", "p:2", "https://p:3", ""]),
        max_size=4,
    ),
)
def test_hostile_no_proxy_lists_never_crash_and_loopback_stays_direct(host, scheme, no_proxy, environ):
    url = f"{scheme}://{host}/mcp"
    found = proxy_for(url, {**environ, "NO_PROXY": no_proxy})
    assert found is None or found.startswith(("http://", "https://"))
    if is_loopback(host):
        assert found is None
    assert isinstance(no_proxy_matches(no_proxy, host.strip("[]"), 443), bool)


# -- loopback, as the resolver reads a host ------------------------------------------------------

_octet = st.one_of(
    st.integers(0, 255).map(str), st.integers(0, 255).map(hex), st.integers(0, 0o377).map(lambda n: f"0{n:o}")
)
_numeric = st.one_of(
    st.lists(_octet, min_size=1, max_size=4).map(".".join),
    st.integers(0, 2**32 - 1).map(str),
    st.ip_addresses(v=6).map(str),
    st.ip_addresses(v=4).map(lambda a: f"::ffff:{a}"),
    st.text(alphabet="0123456789abcdefx.:", min_size=1, max_size=12),
)


@settings(max_examples=400, deadline=None)
@given(_numeric)
def test_loopback_is_where_a_connection_to_the_host_goes(host):
    """A numeric host is loopback for wrap exactly when the resolver's reading of it is a
    loopback or "this host" address (127.1, 0x7f.0.0.1 and 2130706433 are 127.0.0.1 to
    it)."""
    try:
        infos = socket.getaddrinfo(host, 80, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        assert not is_loopback(host) or host.strip(".").lower() in ("localhost",)
        return
    addresses = {ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}
    local = all(
        a.is_loopback
        or a.is_unspecified
        or (
            a.version == 6 and a.ipv4_mapped is not None and (a.ipv4_mapped.is_loopback or a.ipv4_mapped.is_unspecified)
        )
        for a in addresses
    )
    assert is_loopback(host) == local, (host, addresses)


# -- values sent back in a header, as h11 writes and reads them -----------------------------------


def _round_trip(value: str) -> bytes | None:
    """The value h11 (httpx2's and uvicorn's HTTP/1.1) reads back from a request whose header
    carries ``value``; None when h11 refuses to send it."""
    client = h11.Connection(h11.CLIENT)
    try:
        data = client.send(
            h11.Request(
                method="GET", target="/mcp", headers=[("Host", "127.0.0.1"), ("Last-Event-ID", value.encode("latin-1"))]
            )
        )
    except (h11.LocalProtocolError, UnicodeEncodeError):
        return None
    server = h11.Connection(h11.SERVER)
    server.receive_data(data)
    request = server.next_event()
    return dict(request.headers)[b"last-event-id"]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x2FF), max_size=20))
def test_a_value_wrap_sends_back_reaches_the_server_unchanged(value):
    """docs/remote.md, "When the server fails": a session id, protocol version or event id that
    wrap accepts goes out and is read back byte for byte (what it refuses, it never sends)."""
    if header_safe(value) or visible_ascii(value):
        assert _round_trip(value) == value.encode("ascii")
    if visible_ascii(value):
        assert header_safe(value)
