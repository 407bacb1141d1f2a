"""assay's OAuth client for remote MCP servers (docs/auth.md).

A sans-IO core (plain code over values: no I/O, the clock and entropy given) under a thin
trio/httpx2 shell, like the rest of assay (docs/architecture.md, "The OAuth client"):

- :mod:`assay.auth.challenge`  the ``WWW-Authenticate`` challenge of a 401 or a 403;
- :mod:`assay.auth.discovery`  the discovery documents: where they are, what makes them valid;
- :mod:`assay.auth.clientauth` how a client authenticates at a token endpoint (secret, key);
- :mod:`assay.auth.grants`     PKCE, the authorization URL, every token request as a value,
  the token response read;
- :mod:`assay.auth.record`     what a stored login is bound to (its issuer) and what it holds;
- :mod:`assay.auth.browser`    where a browser can be opened, and how;
- :mod:`assay.auth.web`        the shell: the HTTP client of the OAuth requests (capped reads);
- :mod:`assay.auth.locks`      one login at a time across the wraps of a client;
- :mod:`assay.auth.callback`   the loopback redirect server of a browser login;
- :mod:`assay.auth.flows`      the flows themselves over those pieces (discovery, registration,
  the browser, client credentials, the enterprise grant, refresh);
- :mod:`assay.auth.authorizer` a stored login as wrap and ``auth login`` use it;
- :mod:`assay.auth.wrapauth`   the ``httpx2.Auth`` of wrap's client;
- :mod:`assay.auth.listing`    the tools listing ``auth login`` checks a login with;
- :mod:`assay.auth.upstream_creds` serve's credentials to upstreams as values (token requests,
  answers checked, the bounded token cache); :mod:`assay.auth.upstream_auth` their
  ``httpx2.Auth`` (docs/serve.md, "Credentials to upstreams");
- :mod:`assay.auth.login`      ``assay mcp auth login``.

Imported only on the ``--url``, ``auth`` and ``serve`` paths: a stdio wrap loads none of it.
"""
