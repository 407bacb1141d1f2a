"""`assay mcp serve`'s config file (docs/serve.md, "The config file"): every rule, one line per
problem, several problems at once, and never anything but a config or ConfigError."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.gateway.config import (
    Approver,
    ClientCredentials,
    ConfigError,
    Secret,
    StaticHeader,
    TokenExchange,
)
from assay.gateway.configfile import parse_config, split_listen

GOOD = """\
policy: assay.yaml
listen: 127.0.0.1:8787
public_url: https://gw.example/mcp
origins: [https://app.example]
identity:
  oauth:
    issuer: https://issuer.example
    jwks_url: https://issuer.example/jwks
    scopes: [mcp]
  api_keys: keys.txt
limits: {max_body: 1MiB, per_user_concurrency: 4, read_timeout: 5s, session_idle: 10m, session_max_age: 2h,
         max_connections: 300, max_connections_per_address: 30, keep_alive: 45s}
session_key: {env: GW_SESSION_KEY}
session_key_previous: {file: old-session.key}
upstreams:
  files:
    command: [npx, server-filesystem, /srv]
    env: {LOG: debug, TOKEN: {env: FILES_TOKEN}}
    idle_timeout: 5m
  search:
    url: https://search.example/mcp
    credential: {header: Authorization, prefix: "Bearer ", value: {file: search.token}}
  tickets:
    url: https://tickets.example/mcp
    credential:
      token_exchange: {token_url: https://issuer.example/token, client_id: gw, client_secret: {env: GW_SECRET}, audience: tickets}
"""


def parse(text: str):
    return parse_config(textwrap.dedent(text).encode(), base_dir="/etc/assay")


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse(text)
    return err.value.problems


def test_a_whole_config_reads_into_the_model():
    c = parse(GOOD)
    assert c.policy == "assay.yaml" and c.base_dir == "/etc/assay"
    assert c.oauth is not None and c.oauth.audience == "https://gw.example/mcp"  # defaults to public_url
    assert c.oauth.authorization_servers == ("https://issuer.example",) and c.oauth.scopes == ("mcp",)
    assert c.api_keys is not None and c.api_keys.file == "keys.txt" and not c.no_auth
    assert c.limits.max_body_bytes == 1024 * 1024 and c.limits.per_user_concurrency == 4
    assert c.limits.read_timeout_s == 5.0 and c.limits.session_idle_s == 600.0
    assert c.limits.session_max_age_s == 7200.0 and c.session_key == Secret(env="GW_SESSION_KEY")
    assert (c.limits.max_connections, c.limits.max_connections_per_address) == (300, 30)
    assert c.limits.keep_alive_s == 45.0
    assert c.session_key_previous == Secret(file="old-session.key")
    files, search, tickets = c.upstreams
    assert files.transport == "stdio" and files.command == ("npx", "server-filesystem", "/srv")
    assert files.env == (("LOG", "debug"), ("TOKEN", Secret(env="FILES_TOKEN"))) and files.idle_timeout_s == 300
    assert search.transport == "http"
    assert search.credential == StaticHeader("Authorization", Secret(file="search.token"), "Bearer ")
    assert isinstance(tickets.credential, TokenExchange) and tickets.credential.audience == "tickets"
    assert c.separator == "__" and c.store == "sqlite"


def test_a_literal_secret_is_refused_without_echoing_it():
    got = problems(GOOD.replace("{file: search.token}", "hunter2-secret"))
    assert got == [
        "serve.yaml: upstreams.search.credential.value: a secret is never written in the file: use {file: PATH} or {env: VARIABLE}"
    ]
    assert "hunter2" not in "\n".join(got)


def test_no_auth_only_on_loopback():
    base = "policy: p.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n"
    assert parse(base).no_auth
    assert parse("listen: '[::1]:9000'\n" + base).no_auth
    assert parse("listen: localhost:9000\n" + base).no_auth
    got = problems("listen: 0.0.0.0:8787\n" + base)
    assert got == ["serve.yaml: identity.none: no authentication is only allowed on a loopback address, not 0.0.0.0"]


def test_every_problem_is_one_line_and_all_are_reported():
    got = problems(
        """\
        listen: nowhere
        identity: {}
        limits: {max_body: lots, per_user_concurrency: 0}
        upstreams:
          "bad name": {command: [x]}
          a__b: {command: [x]}
          both: {command: [x], url: https://x.example}
          plain: {url: http://example.com/mcp}
        colour: blue
        """
    )
    assert all("\n" not in p and p.startswith("serve.yaml: ") for p in got)
    text = "\n".join(got)
    for needle in (
        "colour: unknown key",
        "policy: is required",
        "listen: expected host:port",
        "identity: needs oauth, api_keys, or none",
        "limits.max_body: expected a size",
        "limits.per_user_concurrency: must be a whole number above zero",
        "upstreams.bad name: a name is",
        "upstreams.a__b: a name must not contain the separator '__'",
        "upstreams.both: needs exactly one of command",
        "upstreams.plain.url: must be an https URL",
    ):
        assert needle in text, (needle, got)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("tls: {cert: c.pem}", "tls: cert and key go together"),
        ("origins: [https://a.example/path]", "origins[0]: must be an origin"),
        ("origins: https://a.example", 'write ["https://a.example"]'),
        ("separator: ''", "separator: must be a non-empty string"),
        ("version: 2", "version: must be 1"),
        ("approval_key: abc", "approval_key: a secret is never written"),
        ("session_key: abc", "session_key: a secret is never written"),
        ("session_key_previous: {env: OLD}", "session_key_previous: needs a session_key"),
        ("limits: {session_max_age: soon}", "limits.session_max_age"),
        ("limits: {keep_alive: 0s}", "limits.keep_alive: must be above zero"),
        ("limits: {max_connections: 0}", "limits.max_connections: must be a whole number above zero"),
        ("limits: {max_connections_per_address: 1.5}", "limits.max_connections_per_address: must be a whole"),
        ("approvals: {approver: phone}", "approvals.approver: is required: webhook or queue"),
        ("approvals: {approver: webhook}", "approvals.url: is required"),
        ("approvals: {approver: webhook, url: 'http://approve.example/x'}", "approvals.url: must be an https URL"),
        ("approvals: {approver: webhook, url: 'https://a.example', secret: s}", "approvals.secret: a secret is never"),
        ("approvals: {approver: queue, url: 'https://a.example'}", "approvals.url: is for a webhook approver"),
        ("approvals: {approver: queue, timeout: 0s}", "approvals.timeout: must be above zero"),
        ("approvals: {approver: queue, timeout: -1}", "approvals.timeout: a duration must be"),
        ("approvals: {approver: queue, colour: red}", "approvals.colour: unknown key"),
        ("admin_listen: nowhere", "admin_listen: expected host:port"),
        ("admin_listen: 127.0.0.1:8787", "admin_listen: must not be the address of listen"),
        ("admin_listen: [a]", "admin_listen: must be a non-empty string"),
        ("otel: {service_name: x}", "otel.endpoint: is required"),
        (
            "otel: {endpoint: http://collector.example:4318}",
            "otel.endpoint: must be an https URL (http only to a loopback",
        ),
        ("otel: {endpoint: 'https://c.example/?k=v'}", "otel.endpoint: must be a URL without user, query or fragment"),
        ("otel: {endpoint: 'https://u:p@c.example'}", "otel.endpoint: must be a URL without user, query or fragment"),
        ("otel: {endpoint: https://c.example, colour: red}", "otel.colour: unknown key"),
        ("otel: {endpoint: https://c.example, service_name: 3}", "otel.service_name: must be a non-empty string"),
        ("otel: https://c.example", "otel: must be a mapping"),
        ("otel: {endpoint: https://c.example, logs: yes please}", "otel.logs: must be true or false"),
        ("otel: {endpoint: https://c.example, logs: true, log_arguments: 1}", "otel.log_arguments: must be true or"),
        ("otel: {endpoint: https://c.example, log_arguments: true}", "otel.log_arguments: needs otel.logs: true"),
    ],
)
def test_single_rules(text, needle):
    base = "policy: p.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n"
    assert any(needle in p for p in problems(base + text + "\n")), problems(base + text + "\n")


def test_approvals():
    base = "policy: p.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n"
    assert parse(base).approvals is None
    got = parse(base + "approvals: {approver: queue}\n").approvals
    assert got == Approver("queue")
    got = parse(
        base + "approvals: {approver: webhook, url: 'http://127.0.0.1:9/ok', secret: {env: HOOK_KEY}, timeout: 2m}\n"
    ).approvals
    assert got == Approver("webhook", url="http://127.0.0.1:9/ok", secret=Secret(env="HOOK_KEY"), timeout_s=120.0)


def test_admin_listen():
    """docs/serve.md, "Health and metrics": off unless set; any address (it is the operator's)."""
    base = "policy: p.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n"
    assert parse(base).admin_listen is None
    assert parse(base + "admin_listen: 127.0.0.1:9464\n").admin_listen == "127.0.0.1:9464"
    assert parse(base + "admin_listen: '[::1]:9464'\n").admin_listen == "[::1]:9464"
    assert parse("listen: 127.0.0.1:0\n" + base + "admin_listen: 127.0.0.1:0\n").admin_listen == "127.0.0.1:0"


def test_otel():
    """docs/serve.md, "Traces": off unless set; the spans go to the endpoint's /v1/traces."""
    base = "policy: p.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n"
    assert parse(base).otel is None
    got = parse(base + "otel: {endpoint: 'http://127.0.0.1:4318'}\n").otel
    assert got is not None and (got.service_name, got.traces_url) == ("assay-serve", "http://127.0.0.1:4318/v1/traces")
    got = parse(base + "otel: {endpoint: 'https://c.example/otlp/', service_name: gw}\n").otel
    assert got is not None and (got.service_name, got.traces_url) == ("gw", "https://c.example/otlp/v1/traces")
    got = parse(base + "otel: {endpoint: 'http://[::1]:4318/v1/traces'}\n").otel
    assert got is not None and got.traces_url == "http://[::1]:4318/v1/traces"
    assert (got.logs, got.log_arguments) == (False, False)


def test_otel_logs():
    """docs/serve.md, "Records as OTLP logs": off unless set; the records go to /v1/logs beside
    the spans' /v1/traces; arguments only when asked for, and only with the logs."""
    base = "policy: p.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n"
    got = parse(base + "otel: {endpoint: 'https://c.example/otlp/', logs: true}\n").otel
    assert got is not None and (got.logs, got.log_arguments) == (True, False)
    assert got.logs_url == "https://c.example/otlp/v1/logs"
    got = parse(base + "otel: {endpoint: 'http://[::1]:4318/v1/traces', logs: true, log_arguments: true}\n").otel
    assert got is not None and (got.logs, got.log_arguments) == (True, True)
    assert got.logs_url == "http://[::1]:4318/v1/logs"
    text = base + "otel: {endpoint: 'https://c.example', logs: 1, log_arguments: true}\n"
    assert problems(text) == ["serve.yaml: otel.logs: must be true or false"]  # one line, not two


def test_oauth_rules():
    base = "policy: p.yaml\nupstreams: {a: {command: [x]}}\n"
    got = problems(base + "identity: {oauth: {issuer: https://i.example, jwks_url: https://i.example/k}}\n")
    assert got == ["serve.yaml: identity.oauth.audience: is required when public_url is not set"]
    got = problems(
        base + "identity: {oauth: {issuer: i, jwks_url: https://i/k, audience: a, algorithms: [RS256, HS256, none]}}\n"
    )
    assert [p.split(": ", 2)[2] for p in got] == [
        "HS256 is not allowed (asymmetric algorithms only)",
        "none is not allowed (asymmetric algorithms only)",
    ]
    cc = parse(
        base.replace(
            "{a: {command: [x]}}",
            "{a: {url: 'http://127.0.0.1:9/mcp', credential: {client_credentials: "
            "{token_url: https://i.example/t, client_id: gw, client_secret: {file: s}}}}}",
        )
        + "identity: {api_keys: {file: k}}\n"
    )
    assert isinstance(cc.upstreams[0].credential, ClientCredentials)


def test_a_key_with_controls_is_shown_escaped():
    got = problems('policy: p\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n"bad\\nkey\\u202e": 1\n')
    assert got == ["serve.yaml: bad\\nkey\\u202e: unknown key (known: " + got[0].split("(known: ")[1]]


def test_yaml_errors_are_one_line():
    assert problems("policy: [\n")[0].startswith("serve.yaml:")
    assert problems("a: 1\na: 2\n")[0].startswith("serve.yaml:2:")
    assert problems("- just\n- a list\n") == ["serve.yaml: must be a mapping, got a list"]


def test_listen_forms():
    assert split_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert split_listen("[::1]:8787") == ("::1", 8787)
    for bad in ("::1:80", "host", "host:99999", "[::1]8787"):
        with pytest.raises(ValueError):
            split_listen(bad)


_yamlish = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)
_keys = st.sampled_from(
    [
        "policy",
        "listen",
        "identity",
        "upstreams",
        "limits",
        "tls",
        "origins",
        "separator",
        "approval_key",
        "session_key",
        "approvals",
        "x",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _yamlish, max_size=6))
def test_any_document_is_a_config_or_a_config_error(doc):
    import json

    try:
        parse_config(json.dumps(doc).encode(), base_dir="/")
    except ConfigError as exc:
        assert exc.problems and all(isinstance(p, str) and "\n" not in p for p in exc.problems)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_a_config_or_a_config_error(data):
    try:
        parse_config(data, base_dir="/")
    except ConfigError as exc:
        assert exc.problems


# -- the store (docs/serve.md, "Several replicas") -----------------------------------------------

MINIMAL = "policy: p.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n"


def test_the_store_is_sqlite_a_file_or_a_postgres_url_with_its_password_from_a_secret() -> None:
    assert (parse(MINIMAL).store, parse(MINIMAL).store_password) == ("sqlite", None)
    assert parse(MINIMAL + "store: state/sessions.db\n").store == "state/sessions.db"
    plain = parse(MINIMAL + "store: postgresql://assay@db.example:5432/assay\n")
    assert (plain.store, plain.store_password, plain.store_pool) == (
        "postgresql://assay@db.example:5432/assay",
        None,
        10,
    )
    full = parse(
        MINIMAL + "store: {url: 'postgres://assay@db:5432/assay?sslmode=require', password: {env: PG_PW}, pool: 3}\n"
    )
    assert (full.store, full.store_password, full.store_pool) == (
        "postgres://assay@db:5432/assay?sslmode=require",
        Secret(env="PG_PW"),
        3,
    )


@pytest.mark.parametrize(
    ("store", "says"),
    [
        ("postgresql://assay:hunter2@db/assay", "a password is never written in the file"),
        ("{url: 'postgresql://assay:hunter2@db/assay'}", "a password is never written in the file"),
        ("{url: postgresql://db/a, password: hunter2}", "a secret is never written in the file"),
        ("{url: postgresql://db/a, pool: 0}", "store.pool: must be a whole number above zero"),
        ("{url: /var/sessions.db}", "store.url: must be a postgresql:// URL"),
        ("{password: {env: X}}", "store.url: is required"),
        ("{url: postgresql://db/a, pasword: {env: X}}", "store.pasword: unknown key"),
        ("postgresql:///assay", "the URL names no host"),
        ("'postgresql://db:port/a'", "is not a valid URL"),
    ],
)
def test_a_bad_store_is_one_line_that_never_echoes_a_password(store: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(MINIMAL + f"store: {store}\n")
    assert len(caught.value.problems) == 1 and says in caught.value.problems[0], caught.value.problems
    assert "hunter2" not in caught.value.problems[0]
